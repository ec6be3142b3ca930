"""`serve`: run the ASGI app under uvicorn the way SageMaker expects (port, workers, timeouts, SIGTERM)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

import uvicorn

from container.env import EnvError, ServerSettings
from container.logs import configure_logging

log = logging.getLogger("sagebox.server")


def _limit_native_threads(threads: int) -> None:
    # Read by OpenMP/MKL when torch or onnxruntime first loads: set before any model import.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))


def _absorb_sigterm(signum: int, frame: FrameType | None) -> None:
    """uvicorn re-raises SIGTERM after its graceful drain; the drain is our clean exit, so exit status 0."""
    log.info("drained after SIGTERM; exiting")


def uvicorn_config(settings: ServerSettings) -> uvicorn.Config:
    return uvicorn.Config(
        "container.app:create_app",
        factory=True,
        host=settings.bind_host,
        port=settings.port,
        workers=settings.workers,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_config=None,
        access_log=False,
        # Longer than SageMaker's 60 s idle timeout, so the platform (not us) closes idle connections.
        timeout_keep_alive=75,
        timeout_graceful_shutdown=settings.drain_seconds,
    )


def serve() -> int:
    try:
        settings = ServerSettings.from_env()
    except EnvError as exc:
        print(f"serve: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    _limit_native_threads(settings.intra_op_threads)
    log.info(
        "serving on port %d with %d worker(s), %d intra-op thread(s) each, timeout %ds",
        settings.port,
        settings.workers,
        settings.intra_op_threads,
        settings.timeout_s,
    )
    config = uvicorn_config(settings)
    if settings.workers == 1:
        signal.signal(signal.SIGTERM, _absorb_sigterm)
        uvicorn.Server(config).run()
        return 0
    from uvicorn.supervisors import Multiprocess

    # The supervisor forwards SIGTERM to every worker; each drains its own in-flight requests.
    Multiprocess(config, sockets=[config.bind_socket()]).run()
    return 0
