"""The local runtime's route table: endpoint name -> the serving process (or container) that answers it."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Route:
    endpoint: str
    url: str  # base URL of the serving process, e.g. http://127.0.0.1:8123
    variant: str = "AllTraffic"
    log_path: str = ""


def load_routes(path: Path) -> dict[str, Route]:
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text())
    return {name: Route(**entry) for name, entry in raw.items()}


def save_routes(path: Path, routes: dict[str, Route]) -> None:
    """Write the table atomically, so a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump({name: asdict(route) for name, route in sorted(routes.items())}, fh, indent=2)
    os.replace(tmp, path)


class RouteTable:
    """Routes read from a file, re-read when the file changes (so `sagebox up` can add endpoints live)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._routes: dict[str, Route] = {}

    def get(self, endpoint: str) -> Route | None:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._routes = load_routes(self.path) if stamp else {}
            self._stamp = stamp
        return self._routes.get(endpoint)
