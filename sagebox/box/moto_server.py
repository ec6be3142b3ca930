"""The embedded AWS: a moto server that also knows the instance types Sagebox deploys.

moto 5.2's SageMaker enum predates ml.c6i, ml.inf2 and ml.trn1; real SageMaker accepts them. The server started
here accepts every type in Sagebox's instance catalog and leaves moto's own check in place for all others.
Run it as `python -m sagebox.box.moto_server --port N`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

_patched = False


def accept_catalog_instance_types() -> None:
    """Let moto's SageMaker endpoint configs use the catalog's instance types (idempotent)."""
    global _patched
    if _patched:
        return
    from moto.sagemaker.models import FakeEndpointConfig

    from infra.catalog import instances

    known = set(instances())
    original: Callable[[Any, str], None] = FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type not in known:
            original(self, instance_type)

    FakeEndpointConfig.validate_instance_type = validate_instance_type  # type: ignore[method-assign]
    _patched = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Sagebox's embedded AWS (moto server)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    accept_catalog_instance_types()
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
