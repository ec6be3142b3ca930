"""Cold start: `python -m container serve` until `/ping` answers 200, beside its floor, measured in one run.

The floor is a fresh interpreter that imports the model's runtime and creates its inference session, nothing else
(ONNX Runtime: `InferenceSession`; TorchScript: `torch.jit.load`; OpenVINO: its dynamic graph compiled): what no
server of this model can start faster than. Starts alternate with floors (the order swapped every round), so both
see the same machine. Each server start is broken down from its own log: the interpreter and the server code's
imports, the HTTP server's start, and the model load's parts (manifest and sha256 checks, runtime and session,
tokenizer, warm-up; container/predictor.py's LoadTimes).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from container.cpu_kind import detect
from container.manifest import load_verified
from sagebox.local_server import LocalServer

FLOOR_SCRIPTS = {
    "onnxruntime": (
        "import sys, onnxruntime as ort\n"
        "o = ort.SessionOptions(); o.intra_op_num_threads = int(sys.argv[2])\n"
        "ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n"
    ),
    "torchscript": "import sys, torch\ntorch.set_num_threads(int(sys.argv[2]))\ntorch.jit.load(sys.argv[1])\n",
    # The one dynamic graph a server needs before it is ready (its static graphs follow in the background).
    "openvino": (
        "import sys, openvino as ov\n"
        "core = ov.Core()\n"
        "core.compile_model(core.read_model(sys.argv[1]), 'CPU', {'INFERENCE_NUM_THREADS': int(sys.argv[2]), "
        "'INFERENCE_PRECISION_HINT': 'f32'})\n"
    ),
}
_IMPORTED = re.compile(r"server code imported ([\d.]+)s after the process started")
_READY = re.compile(
    r"model ready in ([\d.]+)s, ([\d.]+)s after the process started \(verify ([\d.]+)s, runtime and session "
    r"([\d.]+)s, tokenizer ([\d.]+)s, warm-up ([\d.]+)s on buckets (\[[\d, ]*\])\)"
)
POLL_S = 0.01


def floor_seconds(model_dir: Path, threads: int) -> float | None:
    """One fresh interpreter importing the runtime and creating the session; None for a runtime without a floor
    script (a Neuron model's graphs load on NeuronCores)."""
    # The build a server on this CPU loads (container/cpu_kind.py), not only the directory's fallback.
    manifest, _ = load_verified(model_dir).for_cpu(detect(os.environ))
    script = FLOOR_SCRIPTS.get(manifest.runtime)
    if script is None:
        return None
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", script, str(model_dir / manifest.model_file), str(threads)],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def parse_breakdown(log: str) -> dict[str, Any]:
    """The server's own account of its start, from its log lines (empty where a line is missing)."""
    found: dict[str, Any] = {}
    imported = _IMPORTED.search(log)
    if imported:
        found["imports_s"] = float(imported.group(1))
    ready = _READY.search(log)
    if ready:
        load, age, verify, runtime, tokenizer, warm_up = (float(ready.group(i)) for i in range(1, 7))
        found.update(
            ready_after_start_s=age,
            load_s=load,
            verify_s=verify,
            runtime_and_session_s=runtime,
            tokenizer_s=tokenizer,
            warm_up_s=warm_up,
            warmed_buckets=[int(b) for b in ready.group(7).strip("[]").split(",") if b.strip()],
        )
        if imported:
            # uvicorn's start and the app's creation: between the imports and the load's start.
            found["http_server_start_s"] = round(age - load - found["imports_s"], 3)
    return found


def server_start(model_dir: Path, log_path: Path, threads: int, timeout_s: float = 120) -> dict[str, Any]:
    """Spawn the server and poll /ping every 10 ms until 200; the seconds that took, and its log's breakdown."""
    env = {"SAGEBOX_INTRA_OP_THREADS": str(threads)}
    started = time.perf_counter()
    server = LocalServer.spawn(model_dir, log_path, env=env)
    try:
        while True:
            if server.process.poll() is not None or time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"the server did not become ready; see {log_path}")
            try:
                status, _ = server.ping()
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                status = 0
            if status == 200:
                break
            time.sleep(POLL_S)
        seconds = time.perf_counter() - started
    finally:
        server.stop()
    return {"ping_200_s": seconds, **parse_breakdown(server.log())}


def measure_cold_start(model_dir: Path, starts: int, log_dir: Path, threads: int = 2) -> dict[str, Any]:
    """`starts` server starts and as many floors, alternating; medians, their ratio, and every start's breakdown."""
    servers: list[dict[str, Any]] = []
    floors: list[float] = []
    for i in range(starts):
        order = ("floor", "server") if i % 2 == 0 else ("server", "floor")
        for what in order:
            if what == "floor":
                floor = floor_seconds(model_dir, threads)
                if floor is not None:
                    floors.append(floor)
            else:
                servers.append(server_start(model_dir, log_dir / f"cold-start-{i}.log", threads))
    median_server = statistics.median(s["ping_200_s"] for s in servers)
    report: dict[str, Any] = {
        "model": str(model_dir),
        "runtime": load_verified(model_dir).runtime,
        "starts": starts,
        "intra_op_threads": threads,
        "poll_interval_s": POLL_S,
        "ping_200_median_s": round(median_server, 3),
        "floor_median_s": round(statistics.median(floors), 3) if floors else None,
        "breakdown_median_s": _median_breakdown(servers),
        "runs": servers,
        "floors_s": [round(f, 3) for f in floors],
    }
    if floors:
        report["ratio_to_floor"] = round(median_server / statistics.median(floors), 2)
    return report


def _median_breakdown(servers: list[dict[str, Any]]) -> dict[str, float]:
    keys = [k for k, v in servers[0].items() if isinstance(v, float)]
    return {k: round(statistics.median(s[k] for s in servers if k in s), 3) for k in keys}
