"""`sagebox serve`: run the serving container's server as a local process."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a model directory over HTTP (the container's server, as a process)")
    p.add_argument("--model-dir", type=Path, required=True, help="directory holding manifest.json")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 to serve other hosts)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from container import env
    from container.server import serve

    os.environ[env.MODEL_DIR] = str(args.model_dir)
    os.environ[env.BIND_TO_PORT] = str(args.port)
    os.environ[env.MODEL_SERVER_WORKERS] = str(args.workers)
    os.environ[env.BIND_HOST] = args.host
    return serve()
