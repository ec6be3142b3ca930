"""Serving benchmark: HTTP overhead over a direct handler call, the local runtime gateway's overhead, and
micro-batching throughput.

    python scripts/bench_serving.py [--out .sagebox/bench/serving.json] [--int8-model-dir DIR]

1. Overhead (tiny model, 1 thread each side): P50 of POST /invocations on the real server process minus the P50
   of the same work called in-process, measured interleaved (one of each per round, the order rotated every round).
2. Gateway (tiny model): the same request straight to the server, through the local runtime gateway, and through
   the gateway with boto3's sagemaker-runtime client, interleaved.
3. Throughput (BERT-base dims, INT8): QPS of 8 concurrent clients vs one sequential client, with the
   server's micro-batching on (max batch 8); and, for reference, 8 clients with batching off (max batch 1).
   Three workloads: one-sentence contexts, SQuAD-style paragraphs, and the long rainforest paragraph.
4. Batching ceiling (same model, in-process): per-sample time of batches of 2, 4 and 8 vs one sample, per bucket,
   and per operator type from ORT's profiler: no micro-batcher can gain more than the model itself gains from a batch
   (beyond overlapping the per-request HTTP and tokenizing work).
5. Cold start (`--cold-start-model-dir`, default the small model): `/ping` 200 beside its floor, with the server's
   own breakdown (sagebox/bench/cold_start.py).
6. Request path (`--request-path MODEL_DIR`, repeatable): one short request from the bare model call up to boto3
   through the gateway, interleaved (sagebox/bench/request_path.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from container.manifest import load_verified
from container.tasks.question_answering import qa_processor
from sagebox.bench.cold_start import measure_cold_start
from sagebox.bench.latency import interleaved_latency
from sagebox.bench.loadgen import LoadPlan, run_load
from sagebox.bench.machine import cpu_info
from sagebox.bench.request_path import HttpInvoker, measure_request_path, path_line, short_body
from sagebox.bench.stats import summarize_ms
from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS
from sagebox.local_server import LocalServer
from sagebox.paths import state_dir


def _request_body(i: int) -> bytes:
    question = RAINFOREST_QUESTIONS[i % len(RAINFOREST_QUESTIONS)]
    return json.dumps({"question": question, "context": RAINFOREST_CONTEXT}).encode()


def _squad_style_bodies(n: int = 64) -> list[bytes]:
    """Generated SQuAD-style questions on short paragraphs (60-130 tokens): what QA traffic mostly looks like."""
    from sagebox.demo.synth_squad import generate

    return [json.dumps({"question": e.question, "context": e.context}).encode() for e in generate(n, 7, "dev")]


def _short_question_bodies(n: int = 64) -> list[bytes]:
    """The same generated questions, each asked of only the sentence that holds its answer (20-60 tokens): FAQ- or
    search-snippet-style traffic, where a model call is short enough for batching to pay."""
    from sagebox.demo.synth_squad import generate

    bodies = []
    for e in generate(n, 7, "dev"):
        start = e.answers[0].start
        previous_stop = e.context.rfind(". ", 0, start)
        left = previous_stop + 2 if previous_stop >= 0 else 0
        right = e.context.find(". ", start)
        sentence = e.context[left : right + 1 if right >= 0 else len(e.context)]
        bodies.append(json.dumps({"question": e.question, "context": sentence}).encode())
    return bodies


def _interleaved(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, dict[str, float]]:
    """Each call's latency summary: every call once per round, in rotated order, after 30 warm-up calls each."""
    times_ms = interleaved_latency(calls, rounds, warmup=30)
    return {name: summarize_ms([ms / 1000.0 for ms in values]) for name, values in times_ms.items()}


def measure_overhead(
    model_dir: Path, rounds: int, log_dir: Path, bodies: dict[str, bytes]
) -> dict[str, dict[str, Any]]:
    """Per named request: the HTTP round trip vs the same work in-process, one server and one predictor for all."""
    from container.predictor import Predictor, PredictorOptions

    predictor = Predictor.load(model_dir, PredictorOptions(threads=1))
    results: dict[str, dict[str, Any]] = {}
    with LocalServer.start(model_dir, log_dir / "overhead.log", env={"SAGEBOX_INTRA_OP_THREADS": "1"}) as server:
        invoke = HttpInvoker(server.port)
        for name, body in bodies.items():
            request = json.loads(body)
            [feature] = qa_processor(predictor.task).featurize(request["question"], request["context"])
            calls: dict[str, Callable[[], object]] = {
                "http_invocations": partial(invoke, body),
                "direct_handler_call": partial(predictor.predict_batch, [feature]),
                "direct_full_pipeline": partial(predictor.answer, request["question"], request["context"]),
            }
            summary = _interleaved(calls, rounds)
            served, handler, pipeline = (summary[label] for label in calls)
            results[name] = {
                "model": str(model_dir),
                "rounds": rounds,
                "tokens": feature.length,
                "direct_handler_call": handler,
                "direct_full_pipeline": pipeline,
                "http_invocations": served,
                "overhead_p50_ms_vs_handler": served["p50_ms"] - handler["p50_ms"],
                "overhead_p50_ms_vs_pipeline": served["p50_ms"] - pipeline["p50_ms"],
                "target_ms": 1.0,
            }
    return results


def measure_throughput(model_dir: Path, queries: int, log_dir: Path) -> dict[str, object]:
    """QPS of 8 concurrent clients vs one, on two workloads: short SQuAD-style requests and the long paragraph."""
    workloads = {
        "short_questions": _short_question_bodies(),
        "squad_style": _squad_style_bodies(),
        "long_paragraph": [_request_body(i) for i in range(8)],
    }
    results: dict[str, object] = {"model": str(model_dir), "queries_per_run": queries}

    def run(server_port: int, concurrency: int, bodies: list[bytes]) -> dict[str, float]:
        invokers: dict[int, HttpInvoker] = {}

        def send(i: int) -> None:
            import threading

            invoker = invokers.setdefault(threading.get_ident(), HttpInvoker(server_port))
            invoker(bodies[max(i, 0) % len(bodies)])

        outcome = run_load(send, LoadPlan(queries=queries, concurrency=concurrency, warmup=4))
        if outcome.errors:
            raise RuntimeError(f"{len(outcome.errors)} requests failed: {outcome.errors[0]}")
        return {"qps": outcome.qps, **summarize_ms(outcome.latencies_s)}

    for name, bodies in workloads.items():
        with LocalServer.start(model_dir, log_dir / f"{name}-batched.log", env={"SAGEBOX_MAX_BATCH_SIZE": "8"}) as b:
            sequential = run(b.port, 1, bodies)
            concurrent = run(b.port, 8, bodies)
            sequential_again = run(b.port, 1, bodies)
            stats = b.stats()
        with LocalServer.start(model_dir, log_dir / f"{name}-unbatched.log", env={"SAGEBOX_MAX_BATCH_SIZE": "1"}) as u:
            unbatched = run(u.port, 8, bodies)
        seq_qps = (sequential["qps"] + sequential_again["qps"]) / 2
        results[name] = {
            "sequential": sequential,
            "sequential_repeat": sequential_again,
            "concurrency_8_batched": concurrent,
            "concurrency_8_unbatched": unbatched,
            "server_batch_sizes": stats.get("batch_sizes"),
            "model_calls": stats.get("model_calls"),
            "qps_ratio_batched_c8_vs_sequential": concurrent["qps"] / seq_qps,
            "qps_ratio_unbatched_c8_vs_sequential": unbatched["qps"] / seq_qps,
        }
    results["target_ratio"] = 1.3
    return results


def measure_batch_ceiling(model_dir: Path) -> dict[str, Any]:
    """The model's own batch gain at the server's defaults (threads = CPUs, max batch 8): what bounds
    `qps_ratio_batched_c8_vs_sequential`."""
    from container.env import ServerSettings
    from container.predictor import Predictor, PredictorOptions
    from sagebox.bench.batch_ceiling import model_ceiling

    settings = ServerSettings.from_env({})
    predictor = Predictor.load(model_dir, PredictorOptions(threads=settings.intra_op_threads))
    buckets = [b for b in (64, 128, 256, 384) if b in predictor.task.buckets]
    profile_bucket = 128 if 128 in buckets else predictor.task.buckets[0]
    batches = sorted({2, 4, settings.max_batch_size})
    return model_ceiling(predictor, model_dir, buckets, batches, settings.intra_op_threads, profile_bucket)


def measure_gateway(model_dir: Path, rounds: int, log_dir: Path) -> dict[str, object]:
    """What the local runtime adds to an invoke: the same request straight to the serving process, through the
    gateway with a bare HTTP client, and through the gateway with boto3's sagemaker-runtime client, interleaved."""
    from sagebox import aws
    from sagebox.box import processes, runtime_gateway
    from sagebox.box.routes import Route, VariantRoute, save_routes

    body = _request_body(0)
    with LocalServer.start(model_dir, log_dir / "gateway-backend.log") as server:
        routes = log_dir / "routes.json"
        save_routes(routes, {"bench": Route("bench", (VariantRoute("AllTraffic", 1.0, (server.url,)),))})
        url, pid = runtime_gateway.spawn(routes, log_dir / "gateway.log")
        try:
            direct, gateway = HttpInvoker(server.port), HttpInvoker(int(url.rsplit(":", 1)[1]))
            gateway_path = "/endpoints/bench/invocations"
            options = aws.AwsOptions(runtime_endpoint_url=url, local=True)  # the client `sagebox bench` uses
            runtime = aws.client(aws.session(options), "sagemaker-runtime", options)
            calls: dict[str, Callable[[], object]] = {
                "direct_http": lambda: direct(body),
                "gateway_http": lambda: gateway(body, gateway_path),
                "gateway_boto3": lambda: runtime.invoke_endpoint(
                    EndpointName="bench", Body=body, ContentType="application/json"
                )["Body"].read(),
            }
            summary = _interleaved(calls, rounds)
        finally:
            processes.stop(pid)
    return {
        **summary,
        "gateway_overhead_p50_ms": summary["gateway_http"]["p50_ms"] - summary["direct_http"]["p50_ms"],
        "boto3_over_bare_http_p50_ms": summary["gateway_boto3"]["p50_ms"] - summary["gateway_http"]["p50_ms"],
    }


@contextmanager
def _workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sagebox-bench-") as tmp:
        yield Path(tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=state_dir() / "bench" / "serving.json")
    parser.add_argument("--int8-model-dir", type=Path, help="an INT8 BERT-base model directory (built if absent)")
    parser.add_argument("--small-model-dir", type=Path, help="the overhead tests' small model (default: tiny BERT)")
    parser.add_argument("--rounds", type=int, default=300, help="interleaved rounds for the overhead test")
    parser.add_argument("--queries", type=int, default=48, help="queries per throughput run")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--cold-start-model-dir", type=Path, help="the model whose cold start is measured (default: the small model)"
    )
    parser.add_argument("--cold-starts", type=int, default=5, help="server starts (and as many floors), alternating")
    parser.add_argument("--cold-start-only", action="store_true", help="measure the cold start and nothing else")
    parser.add_argument(
        "--request-path",
        type=Path,
        action="append",
        default=[],
        metavar="MODEL_DIR",
        help="a model whose short request is measured from the bare model call to boto3 (repeatable)",
    )
    parser.add_argument("--request-path-only", action="store_true", help="measure the request paths and nothing else")
    args = parser.parse_args(argv)

    from sagebox.demo.models import bert_base_int8_dir, tiny_fp32_dir

    with _workdir() as work:
        report: dict[str, object] = {
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "cpu": cpu_info(),
            },
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        small_model = args.small_model_dir or tiny_fp32_dir()
        if args.request_path:
            paths: list[dict[str, Any]] = []
            report["request_path"] = paths
            for model_dir in args.request_path:
                body = short_body(load_verified(model_dir).task, _squad_style_bodies(1)[0])
                paths.append(measure_request_path(model_dir, body, args.rounds, work))
                print(path_line(paths[-1]))
            if args.request_path_only:
                return _write(report, args.out)
        cold = measure_cold_start(args.cold_start_model_dir or small_model, args.cold_starts, work)
        report["cold_start"] = cold
        print(cold_start_line(cold))
        if args.cold_start_only:
            return _write(report, args.out)
        # The reference workflow's long paragraph (tokenizing it is a good part of the cost), and a typical
        # SQuAD-style paragraph.
        requests = {"long_paragraph": _request_body(0), "squad_style": _squad_style_bodies(1)[0]}
        overheads = measure_overhead(small_model, args.rounds, work, requests)
        report["overhead"] = overheads
        for name, overhead in overheads.items():
            print(
                f"overhead ({name}, {overhead['tokens']} tokens): HTTP P50 "
                f"{overhead['http_invocations']['p50_ms']:.2f} ms; "
                f"vs handler +{overhead['overhead_p50_ms_vs_handler']:.2f} ms, "
                f"vs full in-process pipeline +{overhead['overhead_p50_ms_vs_pipeline']:.2f} ms (target <= 1 ms)"
            )
        gateway = measure_gateway(small_model, args.rounds, work)
        report["gateway"] = gateway
        print(
            f"local runtime gateway: +{gateway['gateway_overhead_p50_ms']:.2f} ms over a direct call at P50; "
            f"boto3's client adds +{gateway['boto3_over_bare_http_p50_ms']:.2f} ms over a bare HTTP client"
        )
        if not args.skip_throughput:
            model_dir = args.int8_model_dir or bert_base_int8_dir()
            throughput = measure_throughput(model_dir, args.queries, work)
            report["throughput"] = throughput
            for name in ("short_questions", "squad_style", "long_paragraph"):
                run = throughput[name]
                assert isinstance(run, dict)
                print(
                    f"throughput ({name}): sequential {run['sequential']['qps']:.2f} QPS, "
                    f"c=8 batched {run['concurrency_8_batched']['qps']:.2f} QPS "
                    f"(x{run['qps_ratio_batched_c8_vs_sequential']:.2f}), "
                    f"c=8 unbatched x{run['qps_ratio_unbatched_c8_vs_sequential']:.2f} (target >= 1.3)"
                )
            ceiling = measure_batch_ceiling(model_dir)
            report["batching_ceiling"] = ceiling
            print("batching ceiling in-process, per-sample gain of a batch over one sample:")
            for bucket, row in ceiling["buckets"].items():
                gains = ", ".join(f"batch {n} x{v['gain']:.2f}" for n, v in row["batched"].items())
                print(f"  {bucket} tokens: {gains}")
            if "op_gain" in ceiling:
                top = list(ceiling["op_gain"]["ops"].items())[:3]
                shares = ", ".join(f"{op} x{v['gain']:.2f}" for op, v in top)
                print(f"  by operator at {ceiling['ops_at_bucket']} tokens (the 3 costliest): {shares}")
    return _write(report, args.out)


def cold_start_line(cold: dict[str, Any]) -> str:
    parts = cold["breakdown_median_s"]
    names = {
        "imports_s": "interpreter and imports",
        "http_server_start_s": "HTTP server",
        "verify_s": "verify",
        "runtime_and_session_s": "runtime and session",
        "tokenizer_s": "tokenizer",
        "warm_up_s": "warm-up",
    }
    shown = ", ".join(f"{label} {parts[key]:.3f}" for key, label in names.items() if key in parts)
    floor = (
        "" if cold["floor_median_s"] is None else f"; floor {cold['floor_median_s']:.3f} s (x{cold['ratio_to_floor']})"
    )
    return (
        f"cold start ({cold['runtime']}): /ping 200 after {cold['ping_200_median_s']:.3f} s{floor}; median s: {shown}"
    )


def _write(report: dict[str, object], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
