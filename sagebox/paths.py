"""Where Sagebox keeps things on the user's machine: a cache for built models, a state dir for runs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE_ENV = "SAGEBOX_CACHE_DIR"
STATE_ENV = "SAGEBOX_STATE_DIR"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Reusable artifacts (demo models, base images): $SAGEBOX_CACHE_DIR, else $XDG_CACHE_HOME/sagebox,
    else ~/.cache/sagebox. (neuron_emu, a product of its own, resolves the same place in neuron_emu/paths.py.)"""
    env = os.environ if env is None else env
    explicit = env.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return (Path(xdg).expanduser() if xdg else home / ".cache") / "sagebox"


def state_dir(env: Mapping[str, str] | None = None, repo: Path = REPO) -> Path:
    """Run state of the local SageMaker-in-a-box and the container tooling ($SAGEBOX_STATE_DIR, default
    <repo>/.sagebox, git-ignored)."""
    env = os.environ if env is None else env
    return Path(env.get(STATE_ENV) or repo / ".sagebox")
