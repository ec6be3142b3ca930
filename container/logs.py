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
