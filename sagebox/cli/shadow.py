"""`sagebox shadow-report ENDPOINT`: how a local endpoint's shadow variant answered, against production.

The box's runtime gateway records every request it mirrored to a shadow variant (sagebox.box.shadow); this command
compares the two sides (answer agreement, EM/F1 of the shadow's answers against production's, P50/P90 latency of
each) and writes the report as JSON and Markdown.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sagebox.errors import SageboxError

if TYPE_CHECKING:
    from sagebox.box.shadow import ShadowRecord


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shadow-report",
        help="compare a local endpoint's shadow variant with production (agreement, EM/F1, P50/P90); JSON + Markdown",
    )
    p.add_argument("endpoint", help="endpoint name (e.g. sagebox-c6i-shadow) or target (c6i-shadow)")
    p.add_argument("--out", type=Path, help="folder for the report (default: <state dir>/reports)")
    p.add_argument("--state-dir", type=Path, help="the box's state directory (default: $SAGEBOX_STATE_DIR or .sagebox)")
    p.set_defaults(func=run)


def find_records(state_dir: Path, name: str) -> tuple[str, list[ShadowRecord]]:
    """The endpoint's records: by its name, else as a target of `sagebox-<target>`."""
    from sagebox.box import shadow

    for endpoint in (name, f"sagebox-{name}"):
        records = shadow.load(state_dir, endpoint)
        if records:
            return endpoint, records
    known = sorted(p.stem for p in (state_dir / shadow.SHADOW_DIR).glob("*.jsonl"))
    hint = f"endpoints with shadow records: {', '.join(known)}" if known else "no endpoint has mirrored a request yet"
    raise SageboxError(
        f"no shadow records for {name!r} in {state_dir}: invoke an endpoint with a shadow variant first ({hint})"
    )


def run(args: argparse.Namespace) -> int:
    from sagebox.box import shadow
    from sagebox.paths import state_dir

    root = args.state_dir or state_dir()
    _, records = find_records(root, args.endpoint)
    summary = shadow.report(records)
    json_path, md_path = shadow.write_report(summary, args.out or root / "reports")
    print(shadow.markdown(summary))
    print(f"wrote {json_path} and {md_path}")
    return 0
