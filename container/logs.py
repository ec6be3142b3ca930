"""Log set-up shared by the server process and its workers: one line per record, to stdout (CloudWatch)."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s [pid %(process)d] %(message)s"


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=FORMAT, stream=sys.stdout, force=True)


def ensure_logging(level: str) -> None:
    """Configure logging unless this process already did (uvicorn workers start with none)."""
    if not logging.getLogger().handlers:
        configure_logging(level)


# How the server's log says its model did not load (container/service.py writes these, with the detail after them);
# whoever runs the server (the box's fleet, `sagebox serve`) reads them back as the failure's reason.
LOAD_FAILURES = ("model refused:", "model failed to load:")


def load_failure(lines: list[str]) -> str | None:
    """The server's own log line that says why its model did not load (the last one), from `model ...` on."""
    for line in reversed(lines):
        for marker in LOAD_FAILURES:
            if marker in line:
                return line[line.index(marker) :].strip()
    return None
