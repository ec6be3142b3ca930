"""Where neuron_emu keeps build caches: a user cache directory, never the repository."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "SAGEBOX_CACHE_DIR"
PACKAGE_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
CSRC_DIR = PACKAGE_DIR / "csrc"
DATA_DIR = PACKAGE_DIR / "data"


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """`$SAGEBOX_CACHE_DIR/neuron_emu`, else `$XDG_CACHE_HOME/sagebox/neuron_emu`,
    else `~/.cache/sagebox/neuron_emu`."""
    env = os.environ if env is None else env
    explicit = env.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser() / "neuron_emu"
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "sagebox" / "neuron_emu"
