"""`sagebox package`: a reproducible SageMaker model.tar.gz from a verified model directory."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sagebox.cli.common import console, err_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("package", help="write a byte-for-byte reproducible model.tar.gz (atomically)")
    p.add_argument("--model-dir", type=Path, required=True, help="directory holding manifest.json")
    p.add_argument("--out", type=Path, required=True, help="path of the model.tar.gz to write")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.pipeline.package.tarball import package_model_dir

    result = package_model_dir(args.model_dir, args.out)
    if result.skipped:
        err_console().print(
            f"[yellow]left out {len(result.skipped)} file(s) the manifest does not list: "
            f"{', '.join(result.skipped[:5])}[/yellow]"
        )
    summary = {
        "path": str(result.path),
        "sha256": result.sha256,
        "bytes": result.bytes,
        "variant": result.manifest.variant,
        "runtime": result.manifest.runtime,
        "members": list(result.members),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        console().print(
            f"wrote {result.path} ({result.bytes / 1e6:,.1f} MB, "
            f"{result.manifest.variant}/{result.manifest.runtime}, "
            f"{len(result.members)} entries)\nsha256 {result.sha256}"
        )
    return 0
