"""`serve`: run the ASGI app under uvicorn the way SageMaker expects (port, workers, timeouts, SIGTERM)."""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from container.env import EnvError, ServerSettings
from container.http_protocol import JsonErrorHttpToolsProtocol
from container.logs import configure_logging
from container.uptime import process_age_s

if TYPE_CHECKING:  # container.app imports NumPy, whose BLAS reads the thread variables set in serve() at import
    from container.app import InFlight, RefuseUnread

log = logging.getLogger("sagebox.server")


def _limit_native_threads(threads: int) -> None:
    # Read by OpenMP/MKL when torch or onnxruntime first loads: set before any model import.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))


class SigtermReport:
    """uvicorn re-raises SIGTERM after its graceful drain; the drain is our clean exit (status 0), and this says how
    it went: "drained" only when every in-flight request finished, else how many the drain deadline cut off."""

    def __init__(self, in_flight: InFlight, drain_seconds: int) -> None:
        self.in_flight = in_flight
        self.drain_seconds = drain_seconds

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        cut = self.in_flight.cut_off
        if cut:
            log.warning(
                "SIGTERM: %d in-flight request(s) cut off at the %ds drain deadline; exiting", cut, self.drain_seconds
            )
        else:
            log.info("drained after SIGTERM; exiting")


def uvicorn_config(
    settings: ServerSettings, app: str | Callable[[], RefuseUnread] = "container.app:create_app"
) -> uvicorn.Config:
    """`app`: an import string (what worker processes load) or a factory called once in this process."""
    return uvicorn.Config(
        app,
        factory=True,
        host=settings.bind_host,
        port=settings.port,
        workers=settings.workers,
        loop="uvloop",
        http=JsonErrorHttpToolsProtocol,  # httptools, answering unparsable requests in JSON
        lifespan="on",
        log_config=None,
        access_log=False,
        # Longer than SageMaker's 60 s idle timeout, so the platform (not us) closes idle connections.
        timeout_keep_alive=75,
        timeout_graceful_shutdown=settings.drain_seconds,
    )


def listening_sockets(settings: ServerSettings) -> list[socket.socket] | None:
    """The inherited listening socket (SAGEBOX_LISTEN_FD), family and type read from the descriptor; None: uvicorn
    binds `bind_host`:`port` itself."""
    if settings.listen_fd is None:
        return None
    try:
        sock = socket.socket(fileno=settings.listen_fd)
    except OSError as exc:
        raise EnvError(f"SAGEBOX_LISTEN_FD {settings.listen_fd} is not an open socket: {exc.strerror}") from None
    sock.setblocking(False)
    return [sock]


def serve() -> int:
    try:
        settings = ServerSettings.from_env()
    except EnvError as exc:
        print(f"serve: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        sockets = listening_sockets(settings)
    except EnvError as exc:
        print(f"serve: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    _limit_native_threads(settings.intra_op_threads)
    age = process_age_s()
    log.info(
        "serving on port %d with %d worker(s), %d intra-op thread(s) each, timeout %ds%s",
        sockets[0].getsockname()[1] if sockets else settings.port,
        settings.workers,
        settings.intra_op_threads,
        settings.timeout_s,
        "" if age is None else f" (server code imported {age:.2f}s after the process started)",
    )
    if settings.workers == 1:
        from container.app import InFlight, create_app

        in_flight = InFlight()
        signal.signal(signal.SIGTERM, SigtermReport(in_flight, settings.drain_seconds))
        config = uvicorn_config(settings, functools.partial(create_app, settings, in_flight=in_flight))
        uvicorn.Server(config).run(sockets=sockets)
        return 0
    config = uvicorn_config(settings)
    from uvicorn.supervisors import Multiprocess

    # The supervisor forwards SIGTERM to every worker; each drains its own in-flight requests.
    Multiprocess(config, sockets=sockets or [config.bind_socket()]).run()
    return 0
