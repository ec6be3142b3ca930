"""`sagebox up|down|status`: SageMaker in a box, on this machine, with no AWS account."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sagebox.box.say import WARNING
from sagebox.box.up import DEFAULT_TARGETS, EMBEDDINGS_TARGETS, LLM_TARGETS
from sagebox.errors import SageboxError

if TYPE_CHECKING:
    from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="an embedded AWS on this machine, deployed to with `cdk deploy` (no account)")
    p.add_argument(
        "--targets",
        help=f"comma-separated targets of infra/targets.json (or {EMBEDDINGS_TARGETS[0]} of "
        f"infra/examples/embeddings.json, {' or '.join(LLM_TARGETS)} of infra/examples/llm.json), 'all', or 'none' "
        f"(start the box only; deploy with `npx cdk deploy`) (default: {','.join(DEFAULT_TARGETS)}, and "
        f"{EMBEDDINGS_TARGETS[0]} / {LLM_TARGETS[0]} / {LLM_TARGETS[2]} when the models hold "
        "embeddings/{fp32,int8}/model.tar.gz / llm/fp32/model.tar.gz / llm/int8/model.tar.gz, as the demo's do; "
        f"{LLM_TARGETS[1]} when they hold llm/neuron/model.tar.gz)",
    )
    p.add_argument(
        "--models",
        type=Path,
        help="packaged models to deploy (<variant>/model.tar.gz; default: build/models, else the demo's)",
    )
    p.add_argument("--containers", action="store_true", help="build the image and run it in containers (podman/Docker)")
    p.add_argument(
        "--time-scale",
        type=float,
        help="run the embedded AWS's bakes, waits, alarm periods and cooldowns at this fraction of their length "
        "(0.001-1; default SAGEBOX_BOX_TIME_SCALE, else 1)",
    )
    p.set_defaults(func=run_up)
    p = sub.add_parser("demo", help="what `make demo` runs: a fresh local box, then the benchmark table")
    p.add_argument("--containers", action="store_true", help="build the image and run it in containers (podman/Docker)")
    p.add_argument("--queries", type=int, default=200, help="benchmark requests per endpoint (default 200)")
    p.set_defaults(func=run_demo)
    p = sub.add_parser("down", help="stop the local box and remove its temporary files (safe twice)")
    p.set_defaults(func=run_down)
    p = sub.add_parser("status", help="what the local box is running")
    p.set_defaults(func=run_status)
    p = sub.add_parser(
        "env", help='shell lines that point AWS SDKs, the CDK CLI and Docker at the box: eval "$(sagebox env)"'
    )
    p.set_defaults(func=run_env)


@contextlib.contextmanager
def _steps() -> Iterator[Callable[[str], contextlib.AbstractContextManager[Callable[[str], None]]]]:
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from sagebox.cli.common import console as make_console

    console = make_console()
    with Progress(
        SpinnerColumn(finished_text="[green]✓"),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:

        @contextlib.contextmanager
        def step(title: str) -> Iterator[Callable[[str], None]]:
            task = progress.add_task(title, total=1)

            def say(line: str) -> None:
                if line.startswith(WARNING):  # kept on screen, where a progress line is replaced by the next
                    progress.console.print(f"[yellow]{escape(line.strip())}")
                    return
                progress.update(task, description=f"{title} [dim]- {line.strip()}")

            try:
                yield say
            except BaseException:
                progress.update(task, description=f"[red]✗ {title}")
                raise
            progress.update(task, description=title, completed=1)

        yield step


def run_up(args: argparse.Namespace) -> int:
    from sagebox.box.up import UpOptions, bring_up
    from sagebox.cli.common import console as make_console
    from sagebox.paths import state_dir

    targets = _targets(args.targets) if args.targets is not None else None
    started = time.monotonic()
    with _steps() as step:
        options = UpOptions(
            tuple(targets) if targets is not None else None,
            args.containers,
            state_dir(),
            getattr(args, "models", None),
            getattr(args, "time_scale", None),
        )
        bring_up(options, step)
    console = make_console()
    console.print(f"\n[bold]SageMaker in a box is up[/] ({time.monotonic() - started:.0f} s)")
    _print_status(console)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from sagebox.box.down import tear_down
    from sagebox.cli import bench
    from sagebox.cli.common import console as make_console
    from sagebox.paths import state_dir

    tear_down(state_dir(), lambda line: None)  # a box left from an earlier run is replaced
    started = time.monotonic()
    run_up(argparse.Namespace(targets=None, containers=args.containers, models=None))
    bench_args = bench.build_parser_defaults()
    bench_args.queries = args.queries
    bench.run(bench_args)
    out = make_console()
    _stream_a_chat(out)
    out.print(
        f"\n[bold]demo done in {time.monotonic() - started:.0f} s.[/] The endpoints are still up: "
        "ask them with `.venv/bin/python scripts/invoke-INT8.py` (or -FP32) and "
        "`.venv/bin/python scripts/invoke-stream.py`, benchmark again with `.venv/bin/sagebox bench`, stop "
        "everything with `.venv/bin/sagebox down`."
    )
    return 0


DEMO_QUESTION = "What is the capital of France? Answer in one sentence."


def _stream_a_chat(out: Console) -> None:
    """One chat answer from the demo's LLM endpoint, printed token by token as InvokeEndpointWithResponseStream
    delivers it (greedy, so every run prints the same answer)."""
    import sys

    from sagebox.box.state import load_state
    from sagebox.box.up import LLM_TARGETS, box_clients
    from sagebox.invoke import generation_request, invoke_stream, write_pieces
    from sagebox.paths import state_dir

    state = load_state(state_dir())
    endpoint = f"sagebox-{LLM_TARGETS[0]}"
    if state is None or endpoint not in state.stacks:  # deployed only when the packages hold the LLM's
        return
    [runtime] = box_clients(state, "sagemaker-runtime")
    request = generation_request(prompt=DEMO_QUESTION, max_tokens=64, parameters={"temperature": 0}, stream=True)
    out.print(f"\n[bold]{endpoint}[/], streamed (InvokeEndpointWithResponseStream): {DEMO_QUESTION}")
    try:
        write_pieces(invoke_stream(runtime, endpoint, request), sys.stdout)
    except SageboxError as exc:
        out.print(f"[yellow]no streamed answer: {exc}[/]")


def _targets(raw: str) -> list[str]:
    from infra.targets import load_targets

    if raw.strip() == "all":
        return [t.name for t in load_targets()]  # infra/targets.json's (the embeddings one only when named)
    if raw.strip() == "none":
        return []
    targets = [t.strip() for t in raw.split(",") if t.strip()]
    if not targets:
        raise SageboxError("--targets names no target")
    return targets


def run_down(args: argparse.Namespace) -> int:
    from sagebox.box.down import tear_down
    from sagebox.paths import state_dir

    done = tear_down(state_dir(), print)
    print("the local box is down" if done else "nothing was running; temporary files are gone")
    return 0


def _print_status(console: Console) -> None:
    from rich.table import Table

    from sagebox.box import processes
    from sagebox.box.inventory import list_endpoints
    from sagebox.box.state import load_state
    from sagebox.box.up import box_clients
    from sagebox.paths import state_dir

    state = load_state(state_dir())
    if state is None:
        console.print("no local box is running (start one with `sagebox up`)")
        return
    if not (state.aws_pid and processes.alive(state.aws_pid)):
        console.print(
            f"the embedded AWS of the last `sagebox up` ({state.aws_url}) is not running: its endpoints are gone; "
            "`sagebox down`, then `sagebox up`, brings the box back"
        )
        return
    (sagemaker,) = box_clients(state, "sagemaker")
    endpoints = list_endpoints(state, state_dir(), sagemaker)
    table = Table(title=f"endpoints ({state.mode}; models: {state.models_source})", title_justify="left")
    columns = ("target", "endpoint", "status", "instance type", "variant", "model", "variants (weight, instances)")
    for column in (*columns, "restarts", "rollbacks"):
        table.add_column(column)
    notes: list[str] = []
    for e in endpoints.values():
        # A failed endpoint says why in the table; an update that failed or rolled back says so below it.
        shown = e.failure_reason and (e.status == "Failed" or not e.last_update)
        status = f"{e.status}: {e.failure_reason[:80]}" if shown else e.status
        alive = f" ({e.alive} alive)" if e.instances and e.alive != e.instances else ""
        variants = "\n".join(v.describe() for v in e.variants)
        table.add_row(
            e.target,
            e.endpoint_name,
            status,
            e.instance_type,
            e.variant,
            ", ".join(e.models),
            (variants or "-") + alive,
            str(e.restarts),
            str(e.rollbacks),
        )
        for label, text in (
            ("updating", e.update),
            ("old fleet", e.retiring),
            ("last update", e.last_update),
            ("scaled", e.scaling),
            ("serverless", e.serverless),
            ("async", e.asynchronous),
            ("shadow", e.shadow),
        ):
            if text:
                notes.append(f"{e.endpoint_name}: {label} {text}")
    console.print(table)
    for note in notes:
        console.print(note, highlight=False, soft_wrap=True)
    console.print(
        f"embedded AWS {state.aws_url}  runtime gateway {state.gateway_url}  AWS proxy {state.aws_proxy_url}  "
        f"models {state.models_dir}\n"
        'try:  eval "$(.venv/bin/sagebox env)"   .venv/bin/python scripts/invoke-INT8.py   '
        ".venv/bin/sagebox bench   .venv/bin/sagebox down"
    )


def run_env(args: argparse.Namespace) -> int:
    from sagebox.box.environment import shell_lines
    from sagebox.box.state import load_state
    from sagebox.paths import state_dir

    state = load_state(state_dir())
    if state is None or not state.aws_url:
        raise SageboxError("no local box is running: start one with `sagebox up`")
    print("\n".join(shell_lines(state)))
    return 0


def run_status(args: argparse.Namespace) -> int:
    from sagebox.cli.common import console as make_console

    _print_status(make_console())
    return 0
