"""The request path of one request, from the floor up, measured in one run with the rounds interleaved:

1. `model_call`: the bare model call on the request's features (tokenized once, beforehand);
2. `in_process_pipeline`: what the server does around it, in process: parse the body, tokenize, the model call,
   post-process, render the JSON answer (container/app.py's steps without HTTP, admission or micro-batching);
3. `server_http`: POST /invocations to a real server process over a keep-alive connection;
4. `gateway_http`: the same through the box's runtime gateway (`/endpoints/<name>/invocations`);
5. `gateway_boto3`: the same with boto3's sagemaker-runtime client, as `sagebox bench` calls it.

The server, the gateway and the in-process predictor each run the model on one intra-op thread.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sagebox.bench.latency import interleaved_latency
from sagebox.bench.stats import summarize_ms
from sagebox.local_server import LocalServer

# One short input per task: a 16-token sentence (with [CLS] and [SEP], for MiniLM's tokenizer) for the tasks that
# take text, and a SQuAD-style question for question answering.
SHORT_SENTENCE = "The Amazon rainforest covers most of the Amazon basin of South America today."
SHORT_BODIES = {
    "feature-extraction": {"inputs": SHORT_SENTENCE},
    "text-classification": {"inputs": SHORT_SENTENCE},
    "token-classification": {"inputs": SHORT_SENTENCE},
}


class HttpInvoker:
    """One keep-alive connection per thread: the least client overhead Python can offer."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._conn: http.client.HTTPConnection | None = None

    def __call__(self, body: bytes, path: str = "/invocations") -> bytes:
        if self._conn is None:
            self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        self._conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = self._conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        return data


def pipeline(predictor: Any, body: bytes) -> bytes:
    """The server's work for `body` in process: parse, featurize, model, decode, render."""
    from container import payload
    from container.app import MAX_ITEMS

    task = predictor.task
    parsed = payload.parse_request(body, payload.JSON, MAX_ITEMS, task)
    answers = predictor.infer(parsed.items, parsed.parameters)
    rendered, _ = task.render(parsed.items, answers, parsed.batch, parsed.parameters)
    return payload.render(rendered, parsed.batch, payload.JSON)


def measure_request_path(model_dir: Path, body: bytes, rounds: int, log_dir: Path) -> dict[str, Any]:
    """P50s (and summaries) of the five calls above for `body`, interleaved, and what each layer adds."""
    from container import payload
    from container.app import MAX_ITEMS
    from container.predictor import Predictor, PredictorOptions
    from sagebox import aws
    from sagebox.box import processes, runtime_gateway
    from sagebox.box.routes import Route, VariantRoute, save_routes

    predictor = Predictor.load(model_dir, PredictorOptions(threads=1))
    parsed = payload.parse_request(body, payload.JSON, MAX_ITEMS, predictor.task)
    features = [f for item in parsed.items for f in predictor.task.featurize(item, parsed.parameters)]
    name = "bench-path"
    env = {"SAGEBOX_INTRA_OP_THREADS": "1"}
    with LocalServer.start(model_dir, log_dir / f"{model_dir.name}-path-server.log", env=env) as server:
        routes = log_dir / f"{model_dir.name}-path-routes.json"
        save_routes(routes, {name: Route(name, (VariantRoute("AllTraffic", 1.0, (server.url,)),))})
        url, pid = runtime_gateway.spawn(routes, log_dir / f"{model_dir.name}-path-gateway.log")
        try:
            direct, gateway = HttpInvoker(server.port), HttpInvoker(int(url.rsplit(":", 1)[1]))
            options = aws.AwsOptions(runtime_endpoint_url=url, local=True)  # the client `sagebox bench` uses
            runtime = aws.client(aws.session(options), "sagemaker-runtime", options)

            def boto3_call() -> bytes:
                response = runtime.invoke_endpoint(EndpointName=name, Body=body, ContentType="application/json")
                answer: bytes = response["Body"].read()
                return answer

            calls: dict[str, Callable[[], object]] = {
                "model_call": partial(predictor.predict_batch, features),
                "in_process_pipeline": partial(pipeline, predictor, body),
                "server_http": partial(direct, body),
                "gateway_http": partial(gateway, body, f"/endpoints/{name}/invocations"),
                "gateway_boto3": boto3_call,
            }
            path = f"/endpoints/{name}/invocations"
            answers = [pipeline(predictor, body), direct(body), gateway(body, path), boto3_call()]
            if len({json.dumps(json.loads(a), sort_keys=True) for a in answers}) != 1:
                raise RuntimeError(f"the paths answered differently: {answers}")
            times_ms = interleaved_latency(calls, rounds, warmup=30)
        finally:
            processes.stop(pid)
            predictor.close()
    summary = {label: summarize_ms([ms / 1000.0 for ms in values]) for label, values in times_ms.items()}
    p50 = {label: s["p50_ms"] for label, s in summary.items()}
    return {
        "model": str(model_dir),
        "task": predictor.manifest.task,
        "variant": predictor.manifest.variant,
        "tokens": [int(f.attention_mask.sum()) for f in features],  # real tokens, padding not counted
        "rounds": rounds,
        **summary,
        "server_over_pipeline_p50_ms": p50["server_http"] - p50["in_process_pipeline"],
        "gateway_over_server_p50_ms": p50["gateway_http"] - p50["server_http"],
        "boto3_over_bare_http_p50_ms": p50["gateway_boto3"] - p50["gateway_http"],
        "boto3_path_over_pipeline": p50["gateway_boto3"] / p50["in_process_pipeline"],
    }


def short_body(task: str, squad_style: bytes) -> bytes:
    """The short request for a model of `task` (question answering: the SQuAD-style one given)."""
    return squad_style if task == "question-answering" else json.dumps(SHORT_BODIES[task]).encode()


def path_line(result: dict[str, Any]) -> str:
    p50 = {k: result[k]["p50_ms"] for k in ("model_call", "in_process_pipeline", "server_http", "gateway_boto3")}
    return (
        f"request path ({result['task']} {result['variant']}, {sum(result['tokens'])} tokens), P50 ms: model "
        f"{p50['model_call']:.2f}, in process {p50['in_process_pipeline']:.2f}, server "
        f"{p50['server_http']:.2f} (+{result['server_over_pipeline_p50_ms']:.2f}), gateway "
        f"+{result['gateway_over_server_p50_ms']:.2f}, boto3 {p50['gateway_boto3']:.2f} "
        f"(x{result['boto3_path_over_pipeline']:.2f} the in-process pipeline)"
    )
