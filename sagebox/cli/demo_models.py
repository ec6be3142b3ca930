"""`sagebox demo-models`: build (once) and print the cached demo model folders."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sagebox.cli.common import console, err_console

CHOICES = ("minilm-squad", "bert-base", "all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo-models",
        help="build and cache the offline demo models (trained MiniLM QA, BERT-base dims)",
        description="Cached under $SAGEBOX_CACHE_DIR (default ~/.cache/sagebox); the first MiniLM build "
        "fine-tunes for a few minutes.",
    )
    p.add_argument("--which", choices=CHOICES, default="minilm-squad")
    p.add_argument("--cache-dir", type=Path, help="cache root (overrides SAGEBOX_CACHE_DIR)")
    p.add_argument("--json", action="store_true", help="print folder paths as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.demo.models import bert_base_dims, cache_root, minilm_squad

    cache = args.cache_dir or cache_root()
    say = err_console().print
    built = {}
    if args.which in {"minilm-squad", "all"}:
        model = minilm_squad(cache, progress=say)
        built["minilm-squad"] = {
            "folder": str(model.folder),
            "train": str(model.train_data),
            "dev": str(model.dev_data),
        }
    if args.which in {"bert-base", "all"}:
        built["bert-base"] = {"folder": str(bert_base_dims(cache).folder)}
    if args.json:
        print(json.dumps(built, indent=2))
    else:
        for name, paths in built.items():
            console().print(f"[bold]{name}[/bold]: " + ", ".join(f"{k}={v}" for k, v in paths.items()))
    return 0
