"""Where Sagebox keeps things on the user's machine: a cache for built models, a state dir for runs."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """Built demo models and other reusable artifacts (SAGEBOX_CACHE_DIR, default ~/.cache/sagebox)."""
    root = os.environ.get("SAGEBOX_CACHE_DIR") or Path.home() / ".cache" / "sagebox"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_dir() -> Path:
    """Run state of the local SageMaker-in-a-box (SAGEBOX_STATE_DIR, default <repo>/.sagebox)."""
    path = Path(os.environ.get("SAGEBOX_STATE_DIR") or REPO / ".sagebox")
    path.mkdir(parents=True, exist_ok=True)
    return path
