"""Text-generation benchmark: streamed latency and throughput of the real server for one or several Sagebox model
directories, llama.cpp (llama-cpp-python and llama-batched-bench) and transformers' generate() beside them on the same
model and prompt, $ per million output tokens, and (optionally) how the server holds up under an overload.

    python scripts/bench_generation.py [--model DIR|GGUF|FOLDER|HUB_ID ...] [--peer-gguf GGUF] [--overload] [--out FILE]

--model is repeatable: each is a text-generation model directory (`sagebox build --task text-generation` writes
one), or anything `sagebox build` takes (a causal LM folder, a GGUF file, a Hub id), built once into the cache
(`$SAGEBOX_CACHE_DIR/bench/generation/`). Default: the demo's SmolLM2-135M-Instruct GGUF from PyPI. Several --model
measure several variants of one model in one run, e.g. a build's FP32 and INT8 directories:

    python scripts/bench_generation.py --model /tmp/smol-work/fp32 --model /tmp/smol-work/int8

each measured the same way, one after the other (a server of its own per directory), and labelled by its manifest's
`variant` (fp32, int8; a second directory of one variant is fp32-2). The first --model's figures are also under the
result's `server` key, as when there was only one.

1. The server (`python -m container serve`, its engine on its own default threads, one fewer than the CPUs, unless
   --server-threads sets SAGEBOX_INTRA_OP_THREADS) over HTTP, greedy, the prompt
   "Write a short story about a robot who learns to paint." through the model's chat template (the Messages API,
   `stream: true`, usage included), 64 new tokens: one stream (a few times, one after the other), then 4 and then 16
   concurrent streams. Each event is timed as its bytes arrive (httpx, the SSE re-split as the bytes come): time to
   first token (TTFT: the first chunk with text, not the role-only chunk), inter-token latency (between chunks with
   text: a chunk may carry two tokens when a character spans them), output tokens/s from the tokens the server
   counts (`usage.completion_tokens`; the server has no ignore_eos, so a generation may end early and the counts are
   what it did). Aggregate tokens/s = all streams' tokens / (last stream's end - first stream's start).
2. llama.cpp, after the servers (sagebox/bench/peers_llama.py says how): llama-cpp-python at one stream (the
   server's chat text, greedy, EOS ignored, TTFT, inter-token P50/P90, tokens/s) and llama-batched-bench's prompt
   and decode tokens/s at 1, 4 and 16 sequences, on the same threads. They run a GGUF file: --peer-gguf, else a
   --model that is one, else the demo GGUF when the model directories were built from it. They run it as it is
   (SmolLM2's is Q4_1), where Sagebox's FP32 serves the same weights dequantized. Their interpreter and binary:
   --llama-python / --llama-batched-bench, else `.sagebox/peers/` (`make peers`); a peer missing is a one-line
   note in the results. Ratios per variant: its one stream over llama-cpp-python's and over generate()'s batch 1,
   its 16-stream aggregate over llama-batched-bench's decode at 16 sequences.
3. transformers' `generate()` on the same weights (AutoModelForCausalLM from the first FP32 directory's config.json
   and safetensors, else the first directory's), the same prompt ids, greedy, 64 new tokens, at batch 1 and a static
   batch of 16, on --threads torch threads (2 by default, as llama.cpp), after the servers stopped.
4. $ per million output tokens, per variant: each instance type's hourly price (infra/data/prices.json) over the
   measured aggregate tokens/s. These figures are THIS machine's throughput priced at each instance's rate, not a
   measurement on that instance.
5. `--overload` (the first --model): a server configured small on purpose (MAX_TOTAL_TOKENS 1024,
   MAX_BATCH_TOTAL_TOKENS 8192: 8 slots, MAX_CONCURRENT_REQUESTS 8 by default) gets 64 requests at once, each a
   ~1,000-token prompt (a paragraph repeated) and max_new_tokens 16: answers vs 503s, the server's RSS (VmRSS of its
   process tree) before, at its peak (sampled during the burst) and after, and a lone short request's latency before
   and after (median of 5).

The result (JSON, with the machine's CPU and the SIMD flags from sagebox/bench/machine.py, and how busy the other
processes kept the CPUs) goes to --out, the servers' logs beside it (<out>-logs/); a short table is printed. The
ratios to look at: aggregate tokens/s at 16 streams over one stream's, and each variant's over llama.cpp's.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import platform
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagebox.bench.cost import cost_per_million
from sagebox.bench.faults.procfs import RssSampler, parse_vm_rss_kib
from sagebox.bench.machine import CpuSnapshot, cpu_info, load_between
from sagebox.bench.peers_llama import (
    PEER_BATCHED_BENCH,
    PEER_PYTHON,
    PEERS_DIR,
    PROMPT_TOKENS,
    find_peers,
    llama_batched_bench,
    llama_python_one_stream,
    peer_ratios,
    skipped,
)
from sagebox.bench.stats import percentile
from sagebox.errors import SageboxError
from sagebox.paths import cache_dir, state_dir

if TYPE_CHECKING:
    from container.manifest import Manifest
from sagebox.sse import DONE, SseDecoder, event_text

STORY_PROMPT = "Write a short story about a robot who learns to paint."
NEW_TOKENS = 64
STREAMS = (4, 16)
THREADS = 2
SINGLE_RUNS = 3
# The overload's paragraph, repeated to ~1,000 tokens.
PARAGRAPH = (
    "The old lighthouse keeper climbed the spiral stairs every evening, counting the steps as his father had taught "
    "him, and at the top he wiped the salt from the great lens before lighting the lamp that warned the ships away "
    "from the rocks below the cliff. "
)


# --- one stream's events, timed (pure) --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamResult:
    """One streamed request as the client saw it. Times are seconds after the request was sent."""

    status: int
    sent: float  # the clock when the request was sent
    token_times: tuple[float, ...]  # when each event carrying generated tokens arrived
    end: float  # when the stream ended ([DONE], the last event, or the error)
    tokens: int  # generated tokens: the server's count where it gives one, else the token events counted
    text: str
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and not self.error and bool(self.token_times)

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    @property
    def gaps(self) -> list[float]:
        """Inter-token latencies: between consecutive events that carried tokens."""
        return [b - a for a, b in itertools.pairwise(self.token_times)]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.end if self.end > 0 else 0.0


def token_event(event: Any) -> bool:
    """Whether an event delivers generated tokens: any TGI token event (one per token, even one whose text is held
    back while a character is incomplete), or a chat chunk with content (the role-only first chunk is not)."""
    if not isinstance(event, dict):
        return False
    if isinstance(event.get("token"), dict):
        return True
    choices = event.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        return isinstance(delta, dict) and bool(delta.get("content"))
    return False


def count_tokens(events: Sequence[Any]) -> int:
    """Generated tokens of a stream: the chat usage chunk's `completion_tokens`, else TGI's last event's
    `details.generated_tokens`, else the token events counted (a lower bound for chat chunks)."""
    for event in reversed(events):
        if not isinstance(event, dict):
            continue
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            return int(usage["completion_tokens"])
        details = event.get("details")
        if isinstance(details, dict) and isinstance(details.get("generated_tokens"), int):
            return int(details["generated_tokens"])
    return sum(1 for event in events if token_event(event))


def read_stream(sent: float, chunks: Iterable[tuple[float, bytes]], status: int = 200) -> StreamResult:
    """A stream's result from its byte pieces, each with the clock at its arrival (pieces split anywhere)."""
    decoder = SseDecoder()
    events: list[Any] = []
    times: list[float] = []
    text: list[str] = []
    error = ""
    last = sent
    done = False

    def take(at: float, data: str) -> bool:
        nonlocal error
        if data.strip() == DONE:
            return True
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            error = f"an event is not JSON: {data[:80]!r}"
            return True
        if isinstance(event, dict) and "error" in event:
            error = str(event["error"])
            return True
        events.append(event)
        if token_event(event):
            times.append(at - sent)
            text.append(event_text(event))
        return False

    for at, chunk in chunks:
        last = at
        if any(take(at, data) for data in decoder.feed(chunk)):
            done = True
            break
    if not done:
        for data in decoder.close():
            if take(last, data):
                break
    return StreamResult(status, sent, tuple(times), last - sent, count_tokens(events), "".join(text), error)


# --- summaries (pure) -------------------------------------------------------------------------------------------------


def ms_summary(values_s: Sequence[float]) -> dict[str, float] | None:
    """P50/P90/mean/min/max in milliseconds (linear interpolation between ranks), or None for no values."""
    if not values_s:
        return None
    ms = [v * 1000.0 for v in values_s]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p90_ms": round(percentile(ms, 90), 2),
        "mean_ms": round(sum(ms) / len(ms), 2),
        "min_ms": round(min(ms), 2),
        "max_ms": round(max(ms), 2),
    }


def stream_row(result: StreamResult) -> dict[str, Any]:
    gaps = ms_summary(result.gaps)
    return {
        "status": result.status,
        "tokens": result.tokens,
        "ttft_ms": None if result.ttft is None else round(result.ttft * 1000.0, 2),
        "itl_p50_ms": gaps["p50_ms"] if gaps else None,
        "itl_p90_ms": gaps["p90_ms"] if gaps else None,
        "end_s": round(result.end, 3),
        "tokens_per_s": round(result.tokens_per_s, 2),
        **({"error": result.error} if result.error else {}),
    }


def concurrent_summary(results: Sequence[StreamResult]) -> dict[str, Any]:
    """Streams that ran at once: aggregate output tokens/s over the whole window, TTFT over the streams, inter-token
    latency over every stream's gaps, and each stream's own figures."""
    ok = [r for r in results if r.ok]
    tokens = sum(r.tokens for r in ok)
    window = max((r.sent + r.end for r in results), default=0.0) - min((r.sent for r in results), default=0.0)
    # Decode alone, as llama-batched-bench's S_TG counts it (every sequence decoding): the token events that arrived
    # while every stream was past its first token and none had ended, over that window (an event carrying two
    # tokens counts one: a lower bound). Streams join as their prompts are prefilled, a few per step.
    steady_from = max((r.sent + r.token_times[0] for r in ok), default=0.0)
    steady_to = min((r.sent + r.end for r in ok), default=0.0)
    decode_window = steady_to - steady_from
    decoded = sum(1 for r in ok for t in r.token_times[1:] if steady_from < r.sent + t <= steady_to)
    return {
        "streams": len(results),
        "failed": len(results) - len(ok),
        "tokens": tokens,
        "wall_s": round(window, 3),
        "aggregate_tokens_per_s": round(tokens / window, 2) if window > 0 else 0.0,
        "decode_tokens_per_s": round(decoded / decode_window, 2) if decode_window > 0 else 0.0,
        "ttft": ms_summary([r.ttft for r in ok if r.ttft is not None]),
        "inter_token": ms_summary([gap for r in ok for gap in r.gaps]),
        "per_stream": [stream_row(r) for r in results],
    }


def sequential_summary(results: Sequence[StreamResult]) -> dict[str, Any]:
    """One stream at a time, several times: the median run's TTFT and tokens/s, inter-token latency over all runs."""
    ok = [r for r in results if r.ok]
    if not ok:
        return {"runs": len(results), "failed": len(results), "per_run": [stream_row(r) for r in results]}
    return {
        "runs": len(results),
        "failed": len(results) - len(ok),
        "tokens": statistics.median_low(r.tokens for r in ok),
        "ttft_ms": round(statistics.median(r.ttft or 0.0 for r in ok) * 1000.0, 2),
        "inter_token": ms_summary([gap for r in ok for gap in r.gaps]),
        "tokens_per_s": round(statistics.median(r.tokens_per_s for r in ok), 2),
        "per_run": [stream_row(r) for r in results],
    }


def generated_count(ids: Sequence[int], eos: Iterable[int]) -> int:
    """Tokens a generate() row made: up to and including its first EOS (after it, transformers pads)."""
    stops = set(eos)
    for index, token in enumerate(ids):
        if token in stops:
            return index + 1
    return len(ids)


def cost_rows(tokens_per_s: float, per_hour: Mapping[str, float]) -> dict[str, float]:
    """$ per million output tokens at each hourly price, for one instance producing `tokens_per_s`."""
    if tokens_per_s <= 0:
        return {}
    return {name: round(cost_per_million(price, tokens_per_s), 4) for name, price in sorted(per_hour.items())}


def repeat_to_tokens(paragraph: str, target: int, count: Callable[[str], int]) -> str:
    """The paragraph repeated as often as its token count stays within `target` (at least once)."""
    text = paragraph
    while count(text + paragraph) <= target:
        text += paragraph
    return text


def chat_body(prompt: str, max_tokens: int, stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# --- the model --------------------------------------------------------------------------------------------------------


def demo_gguf() -> Path:
    """The demo's SmolLM2-135M-Instruct GGUF file (sagebox/demo/llm.py finds it)."""
    from sagebox.demo.llm import smollm2_gguf

    return smollm2_gguf()


def model_dir_for(model: str, cache: Path, say: Callable[[str], None]) -> Path:
    """A text-generation model directory: `model` itself when it is one, else `model` built once into the cache."""
    from container.manifest import MANIFEST_NAME, ManifestError, load_verified, parse

    path = Path(model).expanduser()
    if (path / MANIFEST_NAME).is_file():
        manifest = parse((path / MANIFEST_NAME).read_text(encoding="utf-8"), str(path / MANIFEST_NAME))
        if manifest.task != "text-generation":
            raise SageboxError(f"{path} is a {manifest.task} model directory, not a text-generation one")
        return path
    from sagebox.pipeline.export.generation import build_generation
    from sagebox.pipeline.export.servable import ModelSource, source_spec
    from sagebox.pipeline.load.hf_task import detect_task

    source = ModelSource.resolve(model, say)
    info = detect_task(source.folder, "text-generation")
    spec = source_spec(info, source)
    where = source.folder.resolve()
    stamp = f"{where}|{spec.revision}|{where.stat().st_size}|{where.stat().st_mtime_ns}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name)[:60]
    target = cache / "bench" / "generation" / f"{slug}-{hashlib.sha256(stamp.encode()).hexdigest()[:10]}" / "fp32"
    try:
        current = load_verified(target)
        if current.task == "text-generation" and current.source.name == spec.name:
            return target
    except ManifestError:
        pass
    say(f"building {spec.name} into {target} (FP32, once)")
    build_generation(source.folder, target, info=info, source=source)
    return target


def chat_prompt(model_dir: Path, prompt: str) -> tuple[str, list[int], tuple[int, ...]]:
    """A one-message chat as the server makes it: the text the model's template renders, its token ids (no special
    tokens added: container/generation/model.py's tokenizer and template), and the model's EOS ids."""
    from container.generation.model import load_prompt_side
    from container.generation.request import Message
    from container.manifest import MANIFEST_NAME, parse

    manifest = parse((model_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    tokenizer, template = load_prompt_side(model_dir, manifest)
    if template is None or manifest.generation is None:
        raise SageboxError(f"{model_dir} has no chat template: the benchmark's prompt is a chat")
    text = template.render((Message("user", prompt),))
    ids = list(tokenizer.encode(text, add_special_tokens=False).ids)
    return text, ids, tuple(manifest.generation.eos_token_ids)


def chat_prompt_ids(model_dir: Path, prompt: str) -> tuple[list[int], tuple[int, ...]]:
    """The prompt's token ids as the server makes them for a one-message chat, and the model's EOS ids."""
    _, ids, eos = chat_prompt(model_dir, prompt)
    return ids, eos


def long_prompt(model_dir: Path, target_tokens: int) -> tuple[str, int]:
    """The paragraph repeated to about `target_tokens` prompt tokens (TGI's inputs, the model's special tokens
    added as the server adds them), and its token count."""
    from tokenizers import Tokenizer

    from container.manifest import MANIFEST_NAME, parse

    manifest = parse((model_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(model_dir / manifest.tokenizer.file))
    add = manifest.generation.add_special_tokens if manifest.generation is not None else True

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=add).ids)

    prompt = repeat_to_tokens(PARAGRAPH, target_tokens, count)
    return prompt, count(prompt)


# --- the server over HTTP ---------------------------------------------------------------------------------------------


def stream_once(
    client: Any, url: str, body: Mapping[str, Any], clock: Callable[[], float] = time.perf_counter
) -> StreamResult:
    """POST one streamed request and time each piece of the answer as it arrives."""
    sent = clock()
    try:
        with client.stream("POST", f"{url}/invocations", json=dict(body)) as response:
            if response.status_code != 200:
                detail = response.read().decode("utf-8", errors="replace")[:200]
                return StreamResult(response.status_code, sent, (), clock() - sent, 0, "", detail or "no body")
            return read_stream(sent, ((clock(), chunk) for chunk in response.iter_raw()))
    except Exception as exc:  # a refused connection or a timeout: a failed stream, recorded, not the run's end
        return StreamResult(0, sent, (), clock() - sent, 0, "", f"{type(exc).__name__}: {exc}")


def run_together(count: int, work: Callable[[Any], Any], timeout: float) -> list[Any]:
    """`work(client)` on `count` threads released at once, each with its own HTTP client (its own connection)."""
    import httpx

    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def worker(index: int) -> None:
        with httpx.Client(timeout=timeout) as client:
            barrier.wait()
            results[index] = work(client)

    threads = [threading.Thread(target=worker, args=(i,), name=f"bench-client-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _threads_env(threads: int | None) -> dict[str, str]:
    """The server's intra-op threads: its own default (None) or SAGEBOX_INTRA_OP_THREADS."""
    return {} if threads is None else {"SAGEBOX_INTRA_OP_THREADS": str(threads)}


def server_streams(
    model_dir: Path,
    log_dir: Path,
    threads: int | None,
    new_tokens: int,
    streams: Sequence[int],
    single_runs: int,
    say: Callable[[str], None],
    log_name: str = "server.log",
) -> dict[str, Any]:
    import httpx

    from sagebox.local_server import LocalServer

    env = {"SAGEBOX_SERVICE_USER": "", **_threads_env(threads)}
    body = chat_body(STORY_PROMPT, new_tokens)
    started = time.perf_counter()
    with LocalServer.start(model_dir, log_dir / log_name, env=env) as server:
        ready_s = time.perf_counter() - started
        say(f"server ready in {ready_s:.1f} s; one stream x{single_runs}")
        with httpx.Client(timeout=600) as client:
            stream_once(client, server.url, body)  # warm-up
            singles = [stream_once(client, server.url, body) for _ in range(single_runs)]
        out: dict[str, Any] = {"ready_s": round(ready_s, 2), "env": env, "one_stream": sequential_summary(singles)}
        for count in streams:
            say(f"{count} concurrent streams")
            results = run_together(count, lambda client: stream_once(client, server.url, body), 600)
            out[f"streams_{count}"] = concurrent_summary(results)
        stats = server.stats()
        out["server_stats"] = stats.get("generation")
        out["rss_mib_at_end"] = round(tree_rss(server.process.pid) / 2**20, 1)
        out["text"] = singles[0].text
    return out


# --- transformers' generate() -----------------------------------------------------------------------------------------


def transformers_generate(
    model_dir: Path, prompt: str, new_tokens: int, batches: Sequence[int], threads: int
) -> dict[str, Any]:
    """transformers' greedy generate() on the directory's weights, the server's prompt ids, each static batch."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    ids, eos = chat_prompt_ids(model_dir, prompt)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        started = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
        load_s = time.perf_counter() - started
        pad = eos[0] if eos else 0

        def generate(batch: int, tokens: int) -> tuple[float, list[list[int]]]:
            inputs = torch.tensor([ids] * batch, dtype=torch.int64)
            began = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(
                    inputs,
                    attention_mask=torch.ones_like(inputs),
                    max_new_tokens=tokens,
                    do_sample=False,
                    eos_token_id=list(eos) or None,
                    pad_token_id=pad,
                )
            return time.perf_counter() - began, out[:, len(ids) :].tolist()

        generate(1, new_tokens)  # warm-up: the first calls of each shape cost more
        result: dict[str, Any] = {"load_s": round(load_s, 2), "threads": threads, "prompt_tokens": len(ids)}
        for batch in batches:
            wall, rows = generate(batch, new_tokens)
            counts = [generated_count(row, eos) for row in rows]
            result[f"batch_{batch}"] = {
                "batch": batch,
                "wall_s": round(wall, 3),
                "tokens": sum(counts),
                "tokens_per_s": round(sum(counts) / wall, 2),
                "tokens_per_row": sorted(set(counts)),
            }
            if batch == batches[0]:
                from tokenizers import Tokenizer

                from container.manifest import MANIFEST_NAME, parse

                manifest = parse((model_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
                tokenizer = Tokenizer.from_file(str(model_dir / manifest.tokenizer.file))
                result["text"] = tokenizer.decode(rows[0][: counts[0]], skip_special_tokens=True)
    finally:
        torch.set_num_threads(previous)
    return result


# --- overload ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverloadPlan:
    requests: int = 64
    prompt_tokens: int = 1000
    new_tokens: int = 16
    lone_runs: int = 5
    env: Mapping[str, str] = field(
        default_factory=lambda: {
            "MAX_TOTAL_TOKENS": "1024",
            "MAX_BATCH_TOTAL_TOKENS": "8192",
            "MAX_CONCURRENT_REQUESTS": "8",
        }
    )


def tree_rss(pid: int, proc: Path = Path("/proc")) -> int:
    """VmRSS of a process and its descendants, in bytes."""
    total, todo, seen = 0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with contextlib.suppress(ValueError):  # no VmRSS: a kernel thread, or a zombie
                total += parse_vm_rss_kib((proc / str(current) / "status").read_text()) * 1024
            for task in (proc / str(current) / "task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return total


def _timed_post(client: Any, url: str, body: Mapping[str, Any]) -> dict[str, Any]:
    began = time.perf_counter()
    try:
        response = client.post(f"{url}/invocations", json=dict(body))
    except Exception as exc:
        return {"status": 0, "latency_s": time.perf_counter() - began, "error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"status": response.status_code, "latency_s": time.perf_counter() - began}
    if response.status_code == 200:
        answer = response.json()
        if isinstance(answer, list) and answer and isinstance(answer[0].get("details"), dict):
            details = answer[0]["details"]
            out.update(tokens=details.get("generated_tokens"), finish_reason=details.get("finish_reason"))
    else:
        out["retry_after"] = response.headers.get("retry-after")
    return out


def overload(
    model_dir: Path, log_dir: Path, threads: int | None, plan: OverloadPlan, say: Callable[[str], None]
) -> dict[str, Any]:
    import httpx

    from sagebox.local_server import LocalServer

    total = int(plan.env.get("MAX_TOTAL_TOKENS", "0") or 0)
    target = min(plan.prompt_tokens, total - plan.new_tokens) if total else plan.prompt_tokens
    prompt, prompt_tokens = long_prompt(model_dir, target)
    if total and prompt_tokens + plan.new_tokens > total:
        raise SageboxError(
            f"the overload's prompt ({prompt_tokens} tokens: the paragraph at least once) and {plan.new_tokens} new "
            f"tokens exceed MAX_TOTAL_TOKENS {total}; raise it with --overload-env MAX_TOTAL_TOKENS=N"
        )
    burst_body = {"inputs": prompt, "parameters": {"max_new_tokens": plan.new_tokens, "details": True}}
    lone_body = chat_body(STORY_PROMPT, plan.new_tokens, stream=False)
    env = {"SAGEBOX_SERVICE_USER": "", **_threads_env(threads), **plan.env}
    with LocalServer.start(model_dir, log_dir / "overload.log", env=env) as server:
        pid = server.process.pid
        with httpx.Client(timeout=600) as client:
            _timed_post(client, server.url, lone_body)  # warm-up
            before = [_timed_post(client, server.url, lone_body) for _ in range(plan.lone_runs)]
        rss_before = tree_rss(pid)
        say(f"overload: {plan.requests} requests of {prompt_tokens} prompt tokens at once")
        began = time.perf_counter()
        with RssSampler(pid, every_s=0.05, measure=lambda tree: tree_rss(tree) // 1024) as sampler:
            burst = run_together(plan.requests, lambda client: _timed_post(client, server.url, burst_body), 600)
        burst_s = time.perf_counter() - began
        rss_after = tree_rss(pid)
        with httpx.Client(timeout=600) as client:
            after = [_timed_post(client, server.url, lone_body) for _ in range(plan.lone_runs)]
        stats = server.stats().get("generation")
    answered = [r for r in burst if r["status"] == 200]
    statuses: dict[str, int] = {}
    for r in burst:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    mib = 1024 * 1024

    def lone(runs: list[dict[str, Any]]) -> dict[str, Any]:
        ok = [r["latency_s"] for r in runs if r["status"] == 200]
        return {
            "runs": len(runs),
            "ok": len(ok),
            "median_ms": round(statistics.median(ok) * 1000.0, 1) if ok else None,
            "latencies_ms": [round(v * 1000.0, 1) for v in ok],
        }

    return {
        "env": env,
        "requests": plan.requests,
        "prompt_tokens": prompt_tokens,
        "max_new_tokens": plan.new_tokens,
        "answered": len(answered),
        "refused_503": statuses.get("503", 0),
        "other_failures": plan.requests - len(answered) - statuses.get("503", 0),
        "statuses": statuses,
        "answered_tokens": sorted({r.get("tokens") for r in answered if r.get("tokens") is not None}),
        "answered_finish_reasons": sorted({str(r.get("finish_reason")) for r in answered}),
        "answered_latency": ms_summary([r["latency_s"] for r in answered]),
        "refused_latency": ms_summary([r["latency_s"] for r in burst if r["status"] == 503]),
        "burst_s": round(burst_s, 2),
        "rss_mib": {
            "before": round(rss_before / mib, 1),
            "peak": round(max(sampler.peak_kib * 1024, rss_before, rss_after) / mib, 1),
            "after": round(rss_after / mib, 1),
            "samples": sampler.samples,
        },
        "lone_request_before": lone(before),
        "lone_request_after": lone(after),
        "server_stats": stats,
    }


# --- the run ----------------------------------------------------------------------------------------------------------


def _streams(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"stream counts must be >= 1, got {text!r}")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", help="a text-generation model directory, or a causal LM folder, GGUF "
                   "file or Hub id to build first; repeatable: each is measured in turn, labelled by its variant "
                   "(default: the demo's SmolLM2-135M-Instruct GGUF)")  # fmt: skip
    p.add_argument("--cache-dir", type=Path, help="where a built model is kept (default $SAGEBOX_CACHE_DIR)")
    p.add_argument("--out", type=Path, default=state_dir() / "bench" / "generation.json")
    p.add_argument("--threads", type=int, default=THREADS, help="threads of llama.cpp and of transformers' generate()")
    p.add_argument("--server-threads", type=int, help="the server's SAGEBOX_INTRA_OP_THREADS (default: its own)")
    p.add_argument("--new-tokens", type=int, default=NEW_TOKENS, help="tokens to generate per request")
    p.add_argument("--streams", type=_streams, default=STREAMS, help="concurrent stream counts (default 4,16)")
    p.add_argument("--single-runs", type=int, default=SINGLE_RUNS, help="one-stream requests, one after the other")
    p.add_argument("--skip-transformers", action="store_true", help="no transformers generate() section")
    p.add_argument("--skip-llama", action="store_true", help="no llama.cpp section")
    p.add_argument("--peer-gguf", type=Path, help="the GGUF file llama.cpp runs (default: a --model that is a GGUF "
                   "file, else the demo GGUF when the model directories were built from it)")  # fmt: skip
    p.add_argument("--llama-python", type=Path, help="an interpreter with llama-cpp-python "
                   f"(default: {PEERS_DIR / PEER_PYTHON}, built by `make peers`)")  # fmt: skip
    p.add_argument("--llama-batched-bench", type=Path, help="llama.cpp's llama-batched-bench "
                   f"(default: {PEERS_DIR / PEER_BATCHED_BENCH}, built by `make peers`)")  # fmt: skip
    p.add_argument("--batched-prompt-tokens", type=int, default=PROMPT_TOKENS,
                   help="llama-batched-bench's prompt tokens per sequence (-npp)")  # fmt: skip
    p.add_argument("--overload", action="store_true", help="also the 64-request overload scenario")
    p.add_argument("--overload-requests", type=int, default=OverloadPlan.requests)
    p.add_argument("--overload-prompt-tokens", type=int, default=OverloadPlan.prompt_tokens)
    p.add_argument(
        "--overload-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the overload server's environment over the defaults (MAX_TOTAL_TOKENS=1024, "
        "MAX_BATCH_TOTAL_TOKENS=8192, MAX_CONCURRENT_REQUESTS=8); repeatable",
    )
    p.add_argument("--prices", type=Path, help="price table JSON (default: infra/data/prices.json)")
    p.add_argument(
        "--agreement",
        action="store_true",
        help="also 20 fixed chats, greedy, alone and 8 at a time, token for token against transformers",
    )
    args = p.parse_args(argv)
    if args.threads < 1 or args.new_tokens < 1 or args.single_runs < 1 or args.overload_requests < 1:
        p.error("--threads, --new-tokens, --single-runs and --overload-requests must be >= 1")
    if args.server_threads is not None and args.server_threads < 1:
        p.error("--server-threads must be >= 1")
    if args.batched_prompt_tokens < 1:
        p.error("--batched-prompt-tokens must be >= 1")
    return args


def variant_labels(variants: Sequence[str]) -> list[str]:
    """Each model directory's label: its variant, numbered from the second directory of one variant (fp32-2)."""
    seen: dict[str, int] = {}
    labels: list[str] = []
    for variant in variants:
        seen[variant] = seen.get(variant, 0) + 1
        labels.append(variant if seen[variant] == 1 else f"{variant}-{seen[variant]}")
    return labels


def reference_label(variants: Mapping[str, str]) -> str:
    """The model transformers' generate() loads: the first FP32 directory (an INT8 one's weights are not what
    AutoModelForCausalLM reads), else the first."""
    return next((label for label, variant in variants.items() if variant == "fp32"), next(iter(variants)))


def peer_gguf(
    given: Path | None, models: Sequence[str], sources: Sequence[str], demo: Callable[[], Path]
) -> tuple[Path | None, str]:
    """The GGUF file the llama.cpp peers run, or None and why: --peer-gguf, else the first --model that is a GGUF
    file, else the demo's when every model directory was built from it (the manifest's source name is the file's)."""
    if given is not None:
        return (given, "") if given.is_file() else (None, f"--peer-gguf {given} is not a file")
    for model in models:
        path = Path(model).expanduser()
        if path.suffix.lower() == ".gguf" and path.is_file():
            return path, ""
    try:
        demo_file = demo()
    except SageboxError as exc:
        return None, f"no GGUF file for llama.cpp (--peer-gguf FILE): {exc}"
    if sources and all(source == demo_file.name for source in sources):
        return demo_file, ""
    return None, f"no GGUF file for llama.cpp: pass --peer-gguf FILE (the models come from {', '.join(sources)})"


def llama_peers(
    args: argparse.Namespace,
    model_dir: Path,
    sources: Sequence[str],
    sequences: Sequence[int],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """llama-cpp-python at one stream and llama-batched-bench at each sequence count; a peer that cannot run is a
    one-line `skipped` note."""
    if args.skip_llama:
        return {"python": skipped("--skip-llama"), "batched_bench": skipped("--skip-llama")}
    gguf, why = peer_gguf(args.peer_gguf, args.model or [], sources, demo_gguf)
    if gguf is None:
        return {"python": skipped(why), "batched_bench": skipped(why)}
    peers = find_peers(args.llama_python, args.llama_batched_bench)
    out: dict[str, Any] = {
        "gguf": str(gguf),
        "note": "llama.cpp runs the GGUF file as it is (its own quantization, e.g. Q4_1) and ignores EOS; each "
        "Sagebox variant serves what its build made of the weights, and stops at EOS",
    }
    if peers.python is not None:
        say(f"llama-cpp-python, one stream x{args.single_runs}")
        text, ids, _ = chat_prompt(model_dir, STORY_PROMPT)
        before = CpuSnapshot.take()
        out["python"] = llama_python_one_stream(
            peers.python,
            gguf,
            text,
            new_tokens=args.new_tokens,
            threads=args.threads,
            runs=args.single_runs,
            prompt_ids=ids,
        )
        out["python"]["load"] = load_between(before, CpuSnapshot.take(), os.cpu_count() or 1)
    else:
        out["python"] = skipped(peers.notes["python"])
    if peers.batched_bench is not None:
        say(f"llama-batched-bench at {','.join(map(str, sequences))} sequences")
        before = CpuSnapshot.take()
        out["batched_bench"] = llama_batched_bench(
            peers.batched_bench,
            gguf,
            prompt_tokens=args.batched_prompt_tokens,
            new_tokens=args.new_tokens,
            sequences=sequences,
            threads=args.threads,
        )
        # llama.cpp's threads wait for each other at every op: with 2 threads on 2 cores, another process busy on one
        # core cut its 1-sequence decode from 88-101 (idle, 3 runs) to 7 tokens/s here: how busy the others were is kept
        out["batched_bench"]["load"] = load_between(before, CpuSnapshot.take(), os.cpu_count() or 1)
    else:
        out["batched_bench"] = skipped(peers.notes["batched_bench"])
    return out


def _manifest(model_dir: Path) -> Manifest:
    from container.manifest import MANIFEST_NAME, parse

    return parse((model_dir / MANIFEST_NAME).read_text(encoding="utf-8"))


def run(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    from infra.catalog import load_prices

    prices = load_prices(args.prices)
    overrides = dict(item.partition("=")[::2] for item in args.overload_env)
    if any(not name for name in overrides):
        raise SageboxError("--overload-env takes NAME=VALUE")
    cpu_before = CpuSnapshot.take()
    cache = args.cache_dir or cache_dir()
    dirs = [model_dir_for(model, cache, say) for model in (args.model or [str(demo_gguf())])]
    manifests = [_manifest(model_dir) for model_dir in dirs]
    labels = variant_labels([manifest.variant for manifest in manifests])
    model_dirs = dict(zip(labels, dirs, strict=True))
    variants = {label: manifest.variant for label, manifest in zip(labels, manifests, strict=True)}
    models = {
        label: {"dir": str(model_dir), "variant": variants[label], "source": _source_name(model_dir)}
        for label, model_dir in model_dirs.items()
    }
    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {**cpu_info(), "platform": platform.platform(), "python": platform.python_version()},
        "model": {"dir": str(dirs[0]), "source": _source_name(dirs[0])},
        "models": models,
        "setup": {
            "prompt": STORY_PROMPT,
            "api": "Messages API (chat template), stream, greedy (temperature 0), usage included",
            "new_tokens": args.new_tokens,
            "threads": args.threads,
            "server_threads": args.server_threads if args.server_threads is not None else "the server's default",
            "streams": [1, *args.streams],
        },
    }
    work = args.out.parent / f"{args.out.stem}-logs"  # the servers' logs, kept for a look after the run
    work.mkdir(parents=True, exist_ok=True)
    report["logs"] = str(work)
    servers: dict[str, Any] = {}
    for label, model_dir in model_dirs.items():
        say(f"Sagebox {label}: {model_dir}")
        log_name = "server.log" if len(model_dirs) == 1 else f"server-{label}.log"
        servers[label] = server_streams(
            model_dir, work, args.server_threads, args.new_tokens, args.streams, args.single_runs, say, log_name
        )
        add_stream_ratios(servers[label], args.streams)
    report["servers"] = servers
    report["server"] = servers[labels[0]]  # the first --model's, where a one-model run always put it
    reference = reference_label(variants)
    sequences = sorted({1, *args.streams})
    sources = [manifest.source.name for manifest in manifests]
    report["llama_cpp"] = llama_peers(args, model_dirs[reference], sources, sequences, say)
    if not args.skip_transformers:
        say(f"transformers generate() on {reference}")
        batches = tuple(sorted({1, max(args.streams)}))
        report["transformers"] = transformers_generate(
            model_dirs[reference], STORY_PROMPT, args.new_tokens, batches, args.threads
        )
        report["transformers"]["model"] = reference
        same = report["transformers"].get("text") == servers[reference].get("text")
        report["transformers"]["same_text_as_server_at_batch_1"] = same
    best = max(args.streams)
    report["ratios"] = {
        label: peer_ratios(
            server["one_stream"].get("tokens_per_s"),
            server[f"streams_{best}"]["aggregate_tokens_per_s"],
            best,
            report["llama_cpp"]["python"],
            report["llama_cpp"]["batched_bench"],
            report.get("transformers"),
            server[f"streams_{best}"].get("decode_tokens_per_s"),
        )
        for label, server in servers.items()
    }
    per_variant = {label: variant_costs(server, best, prices.per_hour) for label, server in servers.items()}
    report["cost"] = {
        "note": "this machine's measured tokens/s priced at each instance type's hourly rate: NOT a "
        "measurement on those instances (they have other CPUs and more of them)",
        "prices": f"{prices.source} ({prices.region}, as of {prices.as_of})",
        "usd_per_million_output_tokens": per_variant[labels[0]],
        "per_variant": per_variant,
    }
    if args.overload:
        plan = OverloadPlan(
            requests=args.overload_requests,
            prompt_tokens=args.overload_prompt_tokens,
            env={**OverloadPlan().env, **overrides},
        )
        report["overload"] = overload(dirs[0], work, args.server_threads, plan, say)
    if args.agreement:
        from sagebox.bench.agreement import agreement

        say("token-for-token agreement with transformers")
        report["agreement"] = agreement(dirs[0], threads=args.threads)
    report["load_whole_run"] = load_between(cpu_before, CpuSnapshot.take(), os.cpu_count() or 1)
    return report


def add_stream_ratios(server: dict[str, Any], streams: Sequence[int]) -> None:
    """Each concurrency's aggregate tokens/s over one stream's, into the server's results."""
    one = server["one_stream"].get("tokens_per_s") or 0.0
    for count in streams:
        aggregate = server[f"streams_{count}"]["aggregate_tokens_per_s"]
        server[f"ratio_{count}_streams_over_one"] = round(aggregate / one, 2) if one else None


def variant_costs(server: Mapping[str, Any], best: int, per_hour: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """$ per million output tokens at the most streams and at one stream."""
    return {
        f"{best}_streams": cost_rows(server[f"streams_{best}"]["aggregate_tokens_per_s"], per_hour),
        "1_stream": cost_rows(server["one_stream"].get("tokens_per_s") or 0.0, per_hour),
    }


def _source_name(model_dir: Path) -> str:
    manifest = _manifest(model_dir)
    return f"{manifest.source.name} ({manifest.source.architecture}, {manifest.variant})"


def _fmt(value: Any, spec: str = "{:.1f}") -> str:
    return "-" if value is None else spec.format(value)


Row = tuple[str, str, str, str, str, str, str]


def server_rows(label: str, server: Mapping[str, Any], streams: Sequence[int]) -> list[Row]:
    one = server["one_stream"]
    itl = one.get("inter_token") or {}
    rows: list[Row] = [(f"{label} server, 1 stream", "1", _fmt(one.get("tokens"), "{}"), _fmt(one.get("tokens_per_s")),
                        _fmt(one.get("ttft_ms")), _fmt(itl.get("p50_ms")), _fmt(itl.get("p90_ms")))]  # fmt: skip
    for count in streams:
        run = server[f"streams_{count}"]
        ttft, gaps = run.get("ttft") or {}, run.get("inter_token") or {}
        rows.append((f"{label} server, {count} streams", str(count), str(run["tokens"]),
                     _fmt(run["aggregate_tokens_per_s"]), _fmt(ttft.get("p50_ms")), _fmt(gaps.get("p50_ms")),
                     _fmt(gaps.get("p90_ms"))))  # fmt: skip
    return rows


def llama_rows(llama: Mapping[str, Any]) -> list[Row]:
    rows: list[Row] = []
    python = llama.get("python") or {}
    if "tokens_per_s" in python:
        rows.append(("llama-cpp-python, 1 stream", "1", str(python["tokens"]), _fmt(python["tokens_per_s"]),
                     _fmt(python["ttft_ms"]), _fmt(python["itl_p50_ms"]), _fmt(python["itl_p90_ms"])))  # fmt: skip
    for b, entry in (llama.get("batched_bench") or {}).get("by_sequences", {}).items():
        row = entry["row"]
        rows.append((f"llama-batched-bench decode, {b} seq", b, str(row["b"] * row["tg"]),
                     _fmt(entry["decode_tokens_per_s"]), "-", "-", "-"))  # fmt: skip
    return rows


def llama_lines(llama: Mapping[str, Any]) -> list[str]:
    peers = {"llama-cpp-python": llama.get("python"), "llama-batched-bench": llama.get("batched_bench")}
    lines = [f"{name}: skipped: {entry['skipped']}" for name, entry in peers.items() if entry and "skipped" in entry]
    batched = llama.get("batched_bench") or {}
    if batched.get("by_sequences"):
        shown = ", ".join(f"{b} seq {e['prompt_tokens_per_s']:.1f}" for b, e in batched["by_sequences"].items())
        pp = next(iter(batched["by_sequences"].values()))["row"]["pp"]
        lines.append(f"llama-batched-bench prompt tokens/s ({pp}-token prompts): {shown}")
    if batched.get("missing_sequences"):
        lines.append(f"llama-batched-bench printed no row for {batched['missing_sequences']} sequences")
    return lines


def ratio_name(key: str) -> str:
    """A ratio's key (sagebox/bench/peers_llama.py peer_ratios) as the table says it."""
    if key == "one_stream_over_llama_cpp_python":
        return "1 stream / llama-cpp-python 1 stream"
    if key == "one_stream_over_transformers_batch_1":
        return "1 stream / generate() batch 1"
    found = re.fullmatch(r"streams_(\d+)(_decode)?_over_batched_bench_decode_\d+", key)
    if found is None:
        return key
    return f"{found[1]} streams{' decode' if found[2] else ''} / llama-batched-bench decode at {found[1]}"


def ratio_lines(ratios: Mapping[str, Mapping[str, float | None]]) -> list[str]:
    lines = []
    for label, values in ratios.items():
        shown = ", ".join(f"{ratio_name(key)} x{_fmt(value, '{:.2f}')}" for key, value in values.items())
        lines.append(f"{label} tokens/s: {shown}")
    return lines


def table(report: Mapping[str, Any]) -> list[str]:
    """The short table: one row per measurement, then the ratios, the costs and the overload."""
    streams = report["setup"]["streams"][1:]
    servers = report.get("servers") or {"server": report["server"]}
    rows: list[Row] = [("scenario", "streams", "tokens", "tok/s", "TTFT P50 ms", "ITL P50 ms", "ITL P90 ms")]
    for label, server in servers.items():
        rows += server_rows(label, server, streams)
    rows += llama_rows(report.get("llama_cpp") or {})
    for key, value in (report.get("transformers") or {}).items():
        if key.startswith("batch_"):
            rows.append((f"transformers, batch {value['batch']}", str(value["batch"]), str(value["tokens"]),
                         _fmt(value["tokens_per_s"]), "-", "-", "-"))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]  # fmt: skip
    for label, server in servers.items():
        for count in streams:
            ratio = _fmt(server.get(f"ratio_{count}_streams_over_one"), "{:.2f}")
            lines.append(f"{label}: aggregate tokens/s, {count} streams / 1 stream: x{ratio}")
    lines += llama_lines(report.get("llama_cpp") or {})
    lines += ratio_lines(report.get("ratios") or {})
    cost = report["cost"]
    for label, costs in (cost.get("per_variant") or {"": cost["usd_per_million_output_tokens"]}).items():
        for at, per_type in costs.items():
            shown = ", ".join(f"{name} ${usd:.2f}" for name, usd in per_type.items())
            lines.append(f"{label + ': ' if label else ''}$ per 1M output tokens at {at.replace('_', ' ')}: {shown}")
    lines.append(f"  ({cost['note']})")
    if "overload" in report:
        o = report["overload"]
        rss = o["rss_mib"]
        lines.append(
            f"overload: {o['requests']} requests of {o['prompt_tokens']} tokens: {o['answered']} answered, "
            f"{o['refused_503']} refused (503), {o['other_failures']} other; RSS {rss['before']:.0f} -> peak "
            f"{rss['peak']:.0f} -> {rss['after']:.0f} MiB; lone request median {o['lone_request_before']['median_ms']} "
            f"ms before, {o['lone_request_after']['median_ms']} ms after"
        )
    load = report.get("load_whole_run") or {}
    if load:
        lines.append(
            f"CPU: {report['machine']['model']}, {report['machine']['usable_cpus']} usable; other processes kept "
            f"{load.get('cpus_busy_others')} CPUs busy on average during the run"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    from container.errors import ContainerError
    from infra.catalog import CatalogError

    try:
        report = run(args, say)
    except (SageboxError, CatalogError, ContainerError) as exc:
        print(f"bench_generation: error: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(table(report)))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
