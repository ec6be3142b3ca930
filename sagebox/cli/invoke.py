"""`sagebox invoke`: ask an endpoint the reference questions (or your own), or send it texts (classification, NER,
embeddings), and print the answers and latency; or ask a text-generation endpoint (`--prompt`, `--messages`,
`--inputs`) and print its answer, token by token with `--stream`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sagebox.errors import SageboxError


def add_endpoint_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", help="endpoint name, or a local target such as c6i-int8 (default: by variant)")
    p.add_argument("--region", help="AWS region (default: AWS_REGION, or the local box's)")
    p.add_argument("--profile", help="AWS profile for a real account")
    p.add_argument("--runtime-url", help="sagemaker-runtime endpoint URL (default: AWS's, or the local box's)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("invoke", help="invoke an endpoint (any task) through boto3's sagemaker-runtime client")
    add_endpoint_options(p)
    p.add_argument("--variant", choices=["int8", "fp32", "neuron"], default="int8", help="pick the local endpoint")
    p.add_argument("--question", action="append", help="a question (repeatable; default: the reference questions)")
    p.add_argument("--context", help="the paragraph (default: the Amazon rainforest paragraph)")
    p.add_argument(
        "--text",
        action="append",
        help="a text for a text-classification, token-classification or feature-extraction endpoint (repeatable)",
    )
    p.add_argument(
        "--parameters",
        help='the request\'s "parameters" as JSON, e.g. \'{"top_k": 2}\' (text endpoints; for text generation the '
        "chat's other fields, e.g. '{\"temperature\": 0}', or TGI's parameters with --inputs)",
    )
    p.add_argument("--custom-attributes", help="X-Amzn-SageMaker-Custom-Attributes to send")
    add_generation_options(p)
    p.set_defaults(func=run)


def add_generation_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("text generation")
    g.add_argument("--prompt", help="a user message, sent as a chat (the Messages API: the model's chat template)")
    g.add_argument("--messages", help='the chat as JSON: \'[{"role": "user", "content": "..."}, ...]\'')
    g.add_argument("--inputs", help='a prompt to continue as it is (TGI\'s {"inputs"}, no chat template)')
    g.add_argument("--max-tokens", type=int, help="at most this many new tokens (default: the endpoint's)")
    g.add_argument(
        "--stream",
        action="store_true",
        help="print the tokens as they arrive (InvokeEndpointWithResponseStream)",
    )


def resolve_endpoint(
    args: argparse.Namespace, variant: str | None, task: str | None = "question-answering"
) -> tuple[str, object]:
    """The endpoint name and a sagemaker-runtime client: the local box's when it has that endpoint (or, without
    --endpoint, one of that variant and task: None for any but question answering), else a real account's."""
    from sagebox.runtime import connect

    runtime = connect(args.region, args.profile, args.runtime_url)
    endpoint = args.endpoint
    if runtime.local:
        local = None
        if endpoint:
            local = runtime.find(endpoint)
        elif variant and task is not None:
            local = runtime.by_variant(variant, task)
        elif variant:
            local = next(
                (
                    e
                    for t, e in sorted(runtime.endpoints.items())
                    if e.variant == variant and e.task != "question-answering"
                ),
                None,
            )
        if local is not None:
            return local.endpoint_name, runtime.client
        if endpoint:  # not one of the box's: a real account's endpoint
            runtime = connect(args.region, args.profile, args.runtime_url, use_box=False)
    if not endpoint:
        where = "the local box has none" if runtime.local else "no local box is running (start one with `sagebox up`)"
        raise SageboxError(f"which endpoint? pass --endpoint NAME ({where} for variant {variant})")
    return endpoint, runtime.client


def run(args: argparse.Namespace, variant: str | None = None) -> int:
    from rich.table import Table

    from sagebox.cli.common import console as make_console
    from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS
    from sagebox.invoke import Retry, invoke_qa

    variant = variant or getattr(args, "variant", None)
    if any(getattr(args, name, None) for name in ("prompt", "messages", "inputs", "stream")):
        return run_generation(args)
    if getattr(args, "text", None):
        return run_texts(args, variant)
    endpoint, runtime = resolve_endpoint(args, variant)
    questions = args.question or list(RAINFOREST_QUESTIONS)
    context = args.context or RAINFOREST_CONTEXT
    table = Table(title=f"{endpoint}", title_justify="left")
    for column in ("question", "answer", "score", "latency ms"):
        table.add_column(column, justify="right" if column in ("score", "latency ms") else "left")
    latencies = []
    for question in questions:
        result = invoke_qa(runtime, endpoint, question, context, args.custom_attributes, Retry())
        latencies.append(result.latency_ms)
        table.add_row(question, result.answer, f"{result.score:.3f}", f"{result.latency_ms:.1f}")
    console = make_console()
    console.print(table)
    latencies.sort()
    console.print(f"{len(latencies)} questions, median latency {latencies[len(latencies) // 2]:.1f} ms")
    return 0


def _parameters(args: argparse.Namespace) -> dict[str, object] | None:
    import json

    if not getattr(args, "parameters", None):
        return None
    try:
        parameters = json.loads(args.parameters)
    except json.JSONDecodeError as exc:
        raise SageboxError(f"--parameters is not JSON: {exc.msg}") from None
    if not isinstance(parameters, dict):
        raise SageboxError("--parameters must be a JSON object")
    return parameters


def run_generation(args: argparse.Namespace) -> int:
    """A text-generation endpoint's answer to a chat or a prompt: printed whole, or token by token (`--stream`) as
    InvokeEndpointWithResponseStream relays them. A stream that breaks ends with one line on stderr (exit 1)."""
    from sagebox.invoke import Retry, generated_text, generation_request, invoke_json, invoke_stream, write_pieces

    request = generation_request(
        prompt=args.prompt,
        messages=args.messages,
        inputs=args.inputs,
        max_tokens=args.max_tokens,
        parameters=_parameters(args),
        stream=bool(args.stream),
    )
    # Without --endpoint, the local box's FP32 text-generation endpoint (the INT8 one: --endpoint c6i-llm-int8).
    endpoint, runtime = resolve_endpoint(args, "fp32", task="text-generation")
    custom = getattr(args, "custom_attributes", None)
    if args.stream:
        sent = time.perf_counter()
        arrivals: list[float] = []

        def timed(pieces: Iterator[str]) -> Iterator[str]:
            for piece in pieces:
                arrivals.append(time.perf_counter() - sent)
                yield piece

        write_pieces(timed(invoke_stream(runtime, endpoint, request, custom, retry=Retry())), sys.stdout)
        if getattr(args, "timing", False) and arrivals:
            print(
                f"{len(arrivals)} pieces of text; the first after {arrivals[0] * 1000:.0f} ms, the last after "
                f"{arrivals[-1] * 1000:.0f} ms ({arrivals[-1] / arrivals[0]:.1f}x)",
                file=sys.stderr,
            )
        return 0
    result = invoke_json(runtime, endpoint, request, custom, retry=Retry())
    print(generated_text(result.body))
    return 0


def run_texts(args: argparse.Namespace, variant: str | None) -> int:
    """Send the texts in one request ({"inputs": [...], "parameters": ...}) and show each answer by its shape."""
    from rich.table import Table

    from sagebox.cli.common import console as make_console
    from sagebox.invoke import Retry, invoke_json

    parameters = _parameters(args)
    endpoint, runtime = resolve_endpoint(args, variant, task=None)
    request: dict[str, object] = {"inputs": list(args.text)}
    if parameters:
        request["parameters"] = parameters
    result = invoke_json(runtime, endpoint, request, args.custom_attributes, retry=Retry())
    table = Table(title=f"{endpoint} ({result.latency_ms:.1f} ms)", title_justify="left")
    table.add_column("text")
    table.add_column("answer")
    answers = result.body if isinstance(result.body, list) else [result.body]
    for text, answer in zip(args.text, answers, strict=False):
        table.add_row(text, describe_answer(answer))
    make_console().print(table)
    return 0


def describe_answer(answer: object) -> str:
    """One text's answer, readably: labels with scores, entities, or an embedding's size and first values."""
    if isinstance(answer, dict) and "label" in answer:
        return f"{answer['label']} ({float(answer['score']):.3f})"
    if isinstance(answer, list) and answer and all(isinstance(v, int | float) for v in answer):
        values = ", ".join(f"{float(v):+.4f}" for v in answer[:4])
        norm = sum(float(v) ** 2 for v in answer) ** 0.5
        return f"embedding of {len(answer)} floats (norm {norm:.3f}): [{values}, ...]"
    if isinstance(answer, list) and all(isinstance(a, dict) for a in answer):
        parts = []
        for item in answer:
            if "entity_group" in item or "entity" in item:
                kind = item.get("entity_group", item.get("entity"))
                parts.append(f"{item.get('word')!r} {kind} [{item.get('start')}:{item.get('end')}] {item['score']:.3f}")
            elif "label" in item:
                parts.append(f"{item['label']} ({float(item['score']):.3f})")
        return "; ".join(parts) if parts else "(no entities)"
    return str(answer)


def script_main(variant: str, argv: list[str] | None = None) -> int:
    """Entry point of scripts/invoke-<VARIANT>.py: the same code for the local box and a real account."""
    parser = argparse.ArgumentParser(
        prog=f"invoke-{variant.upper()}.py",
        description=f"Ask the {variant.upper()} endpoint the reference questions about the Amazon rainforest.",
    )
    add_endpoint_options(parser)
    parser.add_argument("--question", action="append")
    parser.add_argument("--context")
    parser.add_argument("--custom-attributes")
    args = parser.parse_args(argv)
    from sagebox.cli.app import run_command

    return run_command(lambda: run(args, variant))


STREAM_PROMPT = "Write a short story about a robot who learns to paint."


def stream_script_main(argv: list[str] | None = None) -> int:
    """Entry point of scripts/invoke-stream.py: a text-generation endpoint's answer, printed as the tokens arrive."""
    parser = argparse.ArgumentParser(
        prog="invoke-stream.py",
        description="Stream a text-generation endpoint's answer to a prompt (a chat message), token by token.",
    )
    parser.add_argument("endpoint", help="endpoint name, or a local target such as c6i-llm")
    parser.add_argument(
        "prompt", nargs="?", default=STREAM_PROMPT, help=f"the user message (default: {STREAM_PROMPT!r})"
    )
    parser.add_argument("--region", help="AWS region (default: AWS_REGION, or the local box's)")
    parser.add_argument("--profile", help="AWS profile for a real account")
    parser.add_argument("--runtime-url", help="sagemaker-runtime endpoint URL (default: AWS's, or the local box's)")
    parser.add_argument("--max-tokens", type=int, default=256, help="at most this many new tokens (default 256)")
    parser.add_argument("--raw", action="store_true", help="send the prompt as TGI's inputs, without the chat template")
    parser.add_argument("--parameters", help="the chat's other fields (or TGI's parameters with --raw) as JSON")
    parser.add_argument("--custom-attributes")
    parser.add_argument(
        "--timing", action="store_true", help="then say on stderr when the first and the last text arrived"
    )
    args = parser.parse_args(argv)
    args.prompt, args.inputs = (None, args.prompt) if args.raw else (args.prompt, None)
    args.messages, args.stream = None, True
    from sagebox.cli.app import run_command

    return run_command(lambda: run_generation(args))


if __name__ == "__main__":
    sys.exit(script_main(Path(sys.argv[0]).stem.split("-")[-1].lower()))
