"""llama.cpp beside Sagebox in the text-generation benchmark (sagebox/bench/generation.py): the same GGUF file, the
same prompt, the same threads, measured two ways.

1. llama-cpp-python at one stream. A short Python program (CHILD below) runs in the peers' own interpreter (the venv
   `make peers` builds from PyPI's sdist; llama_cpp is never imported into Sagebox's venv) and prints its result as
   one JSON line. It loads the GGUF (`Llama(n_ctx=..., n_threads=threads, n_threads_batch=threads)`), tokenizes the
   chat text Sagebox's server renders from the model's template (special tokens parsed, no BOS added: the server's
   ids), and generates `new_tokens` tokens with `Llama.eval` and llama.cpp's own sampler chain: a logit bias of -inf
   on every end-of-generation token (what llama.cpp's `--ignore-eos` does), then greedy. That is the path
   `Llama.generate` takes (eval, then the sampler) without its Python generator, so each token is timed the moment
   it is sampled. `Llama.reset()` before each run makes `eval` drop the whole KV cache, so every run evaluates the
   prompt again (generate() would reuse a cached prefix and flatter the time to first token). One warm-up run, then
   `runs` timed runs: time to first token (prompt evaluated, first token sampled), inter-token latency (between
   sampled tokens), output tokens/s = tokens / the last token's time, as the server's one-stream figure is counted;
   the median run's TTFT and tokens/s, inter-token P50/P90 over every run's gaps.
2. llama.cpp's `llama-batched-bench` at 1, 4 and 16 sequences: `-npp 128 -ntg 64 -npl 1,4,16 -t 2 -c N` with N =
   16 x (128 + 64), so no row is skipped (the tool drops, without a word, any row whose KV cache exceeds -c). Its
   markdown table (PP, TG, B, N_KV, T_PP s, S_PP t/s, T_TG s, S_TG t/s, T s, S t/s) gives, per B, prompt tokens/s
   (S_PP: B x 128 prompt tokens in one batch) and decode tokens/s (S_TG: B x 64 tokens over the decode steps). Its
   tokens are random and nothing is sampled: pure model time, no HTTP, no tokenizer, no prefill mixed in, so
   Sagebox's aggregate over it is end-to-end serving over the engine's bare decode rate.

Where the peers are: --llama-python / --llama-batched-bench, else `.sagebox/peers/` (`make peers`). A peer that is
not there, or that fails, becomes one line in the results (`{"skipped": "..."}`), never the run's end.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import statistics
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.stats import percentile
from sagebox.paths import REPO

PEERS_DIR = REPO / ".sagebox" / "peers"  # where `make peers` builds them
PEER_PYTHON = Path("venv") / "bin" / "python"
PEER_BATCHED_BENCH = Path("build") / "bin" / "llama-batched-bench"
RESULT_MARK = "SAGEBOX-PEER-RESULT "
PROMPT_TOKENS = 128
CONTEXT = 512  # llama-cpp-python's n_ctx: the chat prompt (~40 tokens) and 64 new ones, with room to spare
PYTHON_TIMEOUT_S = 600.0
BATCHED_TIMEOUT_S = 1800.0


class PeerError(Exception):
    """A peer ran but its output is not what this module reads."""


# --- running a process (the one impure part; tests pass their own runner) ---------------------------------------------


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], float], Completed]


def run_process(argv: Sequence[str], timeout: float) -> Completed:
    """Run a command to its end (stdout and stderr kept apart); a timeout or a missing program is a failed run."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Completed(-1, "", f"timed out after {timeout:.0f} s")
    except OSError as exc:
        return Completed(-1, "", f"{type(exc).__name__}: {exc}")
    return Completed(done.returncode, done.stdout, done.stderr)


def failure(argv: Sequence[str], done: Completed) -> str:
    """One line about a failed run: the program, its exit code and the last line it wrote to stderr."""
    last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "no output")
    return f"{Path(argv[0]).name} exited {done.returncode}: {last[:200]}"


# --- where the peers are ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peers:
    python: Path | None
    batched_bench: Path | None
    notes: Mapping[str, str]  # why a peer is missing, by peer: "python", "batched_bench"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_peers(python: Path | None = None, batched_bench: Path | None = None, root: Path = PEERS_DIR) -> Peers:
    """The peers given, else those `make peers` built under `root`; a missing one gets a note instead of a path."""
    notes: dict[str, str] = {}

    def pick(name: str, given: Path | None, default: Path, option: str) -> Path | None:
        path = given if given is not None else root / default
        if _executable(path):
            return path
        if given is not None:
            notes[name] = f"{option} {path} is not an executable file"
        else:
            notes[name] = f"not found at {path} (`make peers` builds it, or pass {option} PATH)"
        return None

    found_python = pick("python", python, PEER_PYTHON, "--llama-python")
    found_bench = pick("batched_bench", batched_bench, PEER_BATCHED_BENCH, "--llama-batched-bench")
    return Peers(found_python, found_bench, notes)


def skipped(note: str) -> dict[str, Any]:
    return {"skipped": note}


# --- llama-cpp-python at one stream -----------------------------------------------------------------------------------

# Runs in the peers' interpreter: argv[1] is the JSON configuration; the result is one line starting RESULT_MARK.
CHILD = r"""
import json, math, sys, time
import llama_cpp

cfg = json.loads(sys.argv[1])
began = time.perf_counter()
llm = llama_cpp.Llama(model_path=cfg["gguf"], n_ctx=cfg["n_ctx"], n_threads=cfg["threads"],
                      n_threads_batch=cfg["threads"], verbose=False)
load_s = time.perf_counter() - began
vocab = llama_cpp.llama_model_get_vocab(llm.model)
n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
eog = [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)]
chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
if eog:
    bias = (llama_cpp.llama_logit_bias * len(eog))(*(llama_cpp.llama_logit_bias(t, -math.inf) for t in eog))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(eog), bias))
llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
prompt = llm.tokenize(cfg["prompt"].encode("utf-8"), add_bos=False, special=True)
if len(prompt) + cfg["new_tokens"] > cfg["n_ctx"]:
    raise SystemExit(f"{len(prompt)} prompt tokens and {cfg['new_tokens']} new ones exceed n_ctx {cfg['n_ctx']}")


def once():
    llm.reset()
    llama_cpp.llama_sampler_reset(chain)
    tokens, times = [], []
    start = time.perf_counter()
    llm.eval(prompt)
    while True:
        token = llama_cpp.llama_sampler_sample(chain, llm.ctx, -1)
        times.append(time.perf_counter() - start)
        tokens.append(token)
        if len(tokens) == cfg["new_tokens"]:
            return tokens, times
        llm.eval([token])


once()
runs = [once() for _ in range(cfg["runs"])]
llama_cpp.llama_sampler_free(chain)
result = {
    "version": llama_cpp.__version__,
    "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
    "load_s": load_s,
    "prompt_ids": prompt,
    "eog_suppressed": eog,
    "runs": [{"tokens": len(tokens), "token_times_s": times} for tokens, times in runs],
    "text": llm.detokenize(runs[0][0]).decode("utf-8", "replace"),
}
print(cfg["mark"] + json.dumps(result), flush=True)
"""


def python_argv(
    python: Path, gguf: Path, prompt_text: str, new_tokens: int, threads: int, runs: int, n_ctx: int = CONTEXT
) -> list[str]:
    config = {
        "gguf": str(gguf),
        "prompt": prompt_text,
        "new_tokens": new_tokens,
        "threads": threads,
        "runs": runs,
        "n_ctx": n_ctx,
        "mark": RESULT_MARK,
    }
    return [str(python), "-c", CHILD, json.dumps(config)]


def parse_child(stdout: str) -> dict[str, Any]:
    """The child's result: the last line starting RESULT_MARK, checked for what the summary reads."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARK)]
    if not lines:
        raise PeerError("the llama-cpp-python child printed no result line")
    try:
        result = json.loads(lines[-1][len(RESULT_MARK) :])
    except json.JSONDecodeError as exc:
        raise PeerError(f"the llama-cpp-python child's result is not JSON: {exc}") from None
    runs = result.get("runs") if isinstance(result, dict) else None
    if not isinstance(runs, list) or not runs:
        raise PeerError("the llama-cpp-python child's result has no runs")
    for run in runs:
        times = run.get("token_times_s") if isinstance(run, dict) else None
        if not isinstance(times, list) or not times or not all(isinstance(t, int | float) for t in times):
            raise PeerError("a llama-cpp-python run has no token times")
        if any(b < a for a, b in itertools.pairwise(times)) or times[0] <= 0:
            raise PeerError("a llama-cpp-python run's token times do not increase")
    return result


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def one_stream_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """The median run's TTFT and tokens/s, inter-token P50/P90 over every run's gaps (the server's one-stream
    summary, sagebox/bench/generation.py sequential_summary, counted the same way)."""
    runs = result["runs"]
    gaps = [b - a for run in runs for a, b in itertools.pairwise(run["token_times_s"])]
    rates = [run["tokens"] / run["token_times_s"][-1] for run in runs]
    return {
        "runs": len(runs),
        "tokens": statistics.median_low(run["tokens"] for run in runs),
        "prompt_tokens": len(result.get("prompt_ids") or []),
        "ttft_ms": _ms(statistics.median(run["token_times_s"][0] for run in runs)),
        "itl_p50_ms": _ms(percentile(gaps, 50)) if gaps else None,
        "itl_p90_ms": _ms(percentile(gaps, 90)) if gaps else None,
        "tokens_per_s": round(statistics.median(rates), 2),
        "per_run_tokens_per_s": [round(rate, 2) for rate in rates],
        "load_s": round(float(result.get("load_s") or 0.0), 2),
        "eos": f"ignored: logit bias -inf on the {len(result.get('eog_suppressed') or [])} end-of-generation tokens",
        "version": result.get("version"),
        "system_info": result.get("system_info"),
        "text": result.get("text", ""),
    }


def llama_python_one_stream(
    python: Path,
    gguf: Path,
    prompt_text: str,
    *,
    new_tokens: int,
    threads: int,
    runs: int,
    prompt_ids: Sequence[int] = (),
    runner: Runner = run_process,
) -> dict[str, Any]:
    """llama-cpp-python's one-stream figures, or a skipped note when the child fails or says nothing readable."""
    n_ctx = max(CONTEXT, len(prompt_ids) + new_tokens)
    argv = python_argv(python, gguf, prompt_text, new_tokens, threads, runs, n_ctx)
    done = runner(argv, PYTHON_TIMEOUT_S)
    if done.returncode != 0:
        return skipped(failure(argv, done))
    try:
        result = parse_child(done.stdout)
    except PeerError as exc:
        return skipped(str(exc))
    summary = one_stream_summary(result)
    summary["python"] = str(python)
    if prompt_ids:
        summary["same_prompt_ids_as_sagebox"] = list(result.get("prompt_ids") or []) == list(prompt_ids)
    return summary


# --- llama-batched-bench ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchedRow:
    """One row of llama-batched-bench's table: B sequences, each PP prompt tokens then TG generated ones."""

    pp: int
    tg: int
    b: int
    n_kv: int
    t_pp_s: float
    prompt_tokens_per_s: float  # S_PP t/s
    t_tg_s: float
    decode_tokens_per_s: float  # S_TG t/s: B x TG / T_TG
    t_s: float
    tokens_per_s: float  # S t/s: all tokens over T_PP + T_TG


COLUMNS = {
    "PP": "pp",
    "TG": "tg",
    "B": "b",
    "N_KV": "n_kv",
    "T_PP s": "t_pp_s",
    "S_PP t/s": "prompt_tokens_per_s",
    "T_TG s": "t_tg_s",
    "S_TG t/s": "decode_tokens_per_s",
    "T s": "t_s",
    "S t/s": "tokens_per_s",
}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_batched_table(text: str) -> list[BatchedRow]:
    """The rows of llama-batched-bench's markdown table, found by its header's column names (in any order)."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.lstrip().startswith("|") and "S_TG t/s" in line), None)
    if header is None:
        raise PeerError("llama-batched-bench printed no table (no 'S_TG t/s' header)")
    names = _cells(lines[header])
    missing = sorted(set(COLUMNS) - set(names))
    if missing:
        raise PeerError(f"llama-batched-bench's table lacks the columns {missing}")
    where = {COLUMNS[name]: index for index, name in enumerate(names) if name in COLUMNS}
    rows: list[BatchedRow] = []
    for line in lines[header + 1 :]:
        if not line.lstrip().startswith("|"):
            if rows:
                break
            continue
        cells = _cells(line)
        if all(set(cell) <= {"-", ":"} for cell in cells):  # the |---|---| rule
            continue
        try:
            values = {key: float(cells[index]) for key, index in where.items()}
        except (ValueError, IndexError):
            raise PeerError(f"llama-batched-bench's table has a row that is not numbers: {line.strip()!r}") from None
        rows.append(
            BatchedRow(
                pp=int(values["pp"]),
                tg=int(values["tg"]),
                b=int(values["b"]),
                n_kv=int(values["n_kv"]),
                t_pp_s=values["t_pp_s"],
                prompt_tokens_per_s=values["prompt_tokens_per_s"],
                t_tg_s=values["t_tg_s"],
                decode_tokens_per_s=values["decode_tokens_per_s"],
                t_s=values["t_s"],
                tokens_per_s=values["tokens_per_s"],
            )
        )
    return rows


SETTINGS = re.compile(r"(\w+) = (-?\d+)")


def parse_batched_settings(text: str) -> dict[str, int]:
    """The settings line above the table: `llama_batched_bench: n_kv_max = 3072, n_batch = 2048, ...`."""
    line = next((line for line in text.splitlines() if "n_kv_max =" in line), "")
    return {name: int(value) for name, value in SETTINGS.findall(line)}


def batched_context(prompt_tokens: int, new_tokens: int, sequences: Sequence[int]) -> int:
    """The -c that runs every row: the widest row's KV cache (B x (PP + TG)); a smaller one drops rows silently."""
    return max(sequences) * (prompt_tokens + new_tokens)


def batched_argv(
    binary: Path, gguf: Path, prompt_tokens: int, new_tokens: int, sequences: Sequence[int], threads: int
) -> list[str]:
    return [
        str(binary),
        "-m",
        str(gguf),
        "-npp",
        str(prompt_tokens),
        "-ntg",
        str(new_tokens),
        "-npl",
        ",".join(str(b) for b in sequences),
        "-t",
        str(threads),
        "-c",
        str(batched_context(prompt_tokens, new_tokens, sequences)),
    ]


def batched_summary(rows: Sequence[BatchedRow], sequences: Sequence[int]) -> dict[str, Any]:
    """Per B: prompt and decode tokens/s (and the row as printed); the B asked for that has no row, listed."""
    by_b = {row.b: row for row in rows}
    return {
        "by_sequences": {
            str(b): {
                "prompt_tokens_per_s": by_b[b].prompt_tokens_per_s,
                "decode_tokens_per_s": by_b[b].decode_tokens_per_s,
                "row": asdict(by_b[b]),
            }
            for b in sequences
            if b in by_b
        },
        "missing_sequences": [b for b in sequences if b not in by_b],
    }


def llama_batched_bench(
    binary: Path,
    gguf: Path,
    *,
    prompt_tokens: int = PROMPT_TOKENS,
    new_tokens: int,
    sequences: Sequence[int],
    threads: int,
    runner: Runner = run_process,
) -> dict[str, Any]:
    """llama-batched-bench's prompt and decode tokens/s per sequence count, or a skipped note when it fails."""
    argv = batched_argv(binary, gguf, prompt_tokens, new_tokens, sequences, threads)
    done = runner(argv, BATCHED_TIMEOUT_S)
    if done.returncode != 0:
        return skipped(failure(argv, done))
    try:
        rows = parse_batched_table(done.stdout)
    except PeerError as exc:
        return skipped(str(exc))
    return {
        "command": " ".join(argv),
        "settings": parse_batched_settings(done.stdout),
        "note": "random tokens, nothing sampled: the engine's bare prompt and decode rates (no HTTP, no tokenizer)",
        **batched_summary(rows, sequences),
    }


# --- Sagebox over the peers -------------------------------------------------------------------------------------------


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or not math.isfinite(denominator) or denominator <= 0:
        return None
    return round(numerator / denominator, 2)


def peer_ratios(
    one_stream_tokens_per_s: float | None,
    aggregate_tokens_per_s: float | None,
    streams: int,
    llama_python: Mapping[str, Any],
    batched: Mapping[str, Any],
    transformers: Mapping[str, Any] | None,
    decode_tokens_per_s: float | None = None,
) -> dict[str, float | None]:
    """A Sagebox variant's tokens/s over the peers': its one stream over llama-cpp-python's one stream and over
    generate() at batch 1; its `streams`-stream aggregate (prefill included) and, given, its decode alone over
    llama-batched-bench's decode at as many sequences. None where a peer was skipped or has no such figure."""
    by_b = batched.get("by_sequences") or {}
    decode = (by_b.get(str(streams)) or {}).get("decode_tokens_per_s")
    generate_one = ((transformers or {}).get("batch_1") or {}).get("tokens_per_s")
    return {
        "one_stream_over_llama_cpp_python": ratio(one_stream_tokens_per_s, llama_python.get("tokens_per_s")),
        "one_stream_over_transformers_batch_1": ratio(one_stream_tokens_per_s, generate_one),
        f"streams_{streams}_over_batched_bench_decode_{streams}": ratio(aggregate_tokens_per_s, decode),
        **(
            {f"streams_{streams}_decode_over_batched_bench_decode_{streams}": ratio(decode_tokens_per_s, decode)}
            if decode_tokens_per_s is not None
            else {}
        ),
    }
