"""The llama.cpp peers of the generation benchmark without llama.cpp: llama-batched-bench's table as version 0.3.36's
sdist prints it, the llama-cpp-python child's result line (parsed, and produced by the real child program against a
stand-in llama_cpp module), the ratios, and peers that are missing or fail becoming one-line notes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sagebox.bench import generation as bench
from sagebox.bench import peers_llama as peers

# llama-batched-bench from llama-cpp-python 0.3.36's vendor/llama.cpp, on SmolLM2-135M-Instruct Q4_1, 2 threads:
# `-npp 128 -ntg 64 -npl 1,4,16 -t 2 -c 3072` (stdout; the loader's lines go to stderr).
BATCHED_STDOUT = """
llama_batched_bench: n_kv_max = 4096, n_batch = 2048, n_ubatch = 512, flash_attn = -1, is_pp_shared = 0, \
is_tg_separate = 0, n_gpu_layers = -1, n_threads = 2, n_threads_batch = 2

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   128 |     64 |    1 |    192 |    0.369 |   346.42 |    0.542 |   118.18 |    0.911 |   210.75 |
|   128 |     64 |    4 |    768 |    1.583 |   323.46 |    1.807 |   141.63 |    3.390 |   226.53 |
|   128 |     64 |   16 |   3072 |   13.833 |   148.05 |   42.324 |    24.19 |   56.157 |    54.70 |

"""


class FakeRunner:
    """Stands in for run_process: answers every command with one canned result and keeps what it was asked."""

    def __init__(self, done: peers.Completed) -> None:
        self.done = done
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> peers.Completed:
        self.calls.append(list(argv))
        return self.done


# --- llama-batched-bench ----------------------------------------------------------------------------------------------


def test_the_batched_bench_table_parses_into_one_row_per_sequence_count() -> None:
    rows = peers.parse_batched_table(BATCHED_STDOUT)
    assert [row.b for row in rows] == [1, 4, 16]
    sixteen = rows[2]
    assert (sixteen.pp, sixteen.tg, sixteen.n_kv) == (128, 64, 3072)
    assert sixteen.prompt_tokens_per_s == 148.05 and sixteen.decode_tokens_per_s == 24.19
    assert sixteen.t_tg_s == 42.324 and sixteen.tokens_per_s == 54.70
    # S_TG is B x TG over T_TG: the parse read the right columns
    assert sixteen.decode_tokens_per_s == pytest.approx(16 * 64 / sixteen.t_tg_s, rel=1e-3)
    settings = peers.parse_batched_settings(BATCHED_STDOUT)
    assert settings["n_kv_max"] == 4096 and settings["n_threads"] == 2 and settings["flash_attn"] == -1


def test_columns_are_found_by_name_not_by_position() -> None:
    swapped = BATCHED_STDOUT.replace("S_PP t/s | ", "@@").replace("S_TG t/s", "S_PP t/s").replace("@@", "S_TG t/s | ")
    [one, *_] = peers.parse_batched_table(swapped)
    assert (one.prompt_tokens_per_s, one.decode_tokens_per_s) == (118.18, 346.42)


def test_a_table_without_its_columns_or_with_words_in_a_row_is_refused() -> None:
    with pytest.raises(peers.PeerError, match="no table"):
        peers.parse_batched_table("llama_batched_bench: n_kv_max = 4096\n")
    with pytest.raises(peers.PeerError, match="T_TG s"):
        peers.parse_batched_table(BATCHED_STDOUT.replace("T_TG s", "T_XX s"))
    with pytest.raises(peers.PeerError, match="not numbers"):
        peers.parse_batched_table(BATCHED_STDOUT.replace("141.63", "nan?"))


def test_the_command_sizes_the_context_for_the_widest_row() -> None:
    argv = peers.batched_argv(Path("/bin/bb"), Path("m.gguf"), 128, 64, [1, 4, 16], 2)
    flags = dict(zip(argv[1::2], argv[2::2], strict=True))
    assert flags == {"-m": "m.gguf", "-npp": "128", "-ntg": "64", "-npl": "1,4,16", "-t": "2", "-c": "3072"}


def test_batched_bench_results_by_sequences_and_the_rows_it_skipped() -> None:
    without_4 = "\n".join(line for line in BATCHED_STDOUT.splitlines() if "|    4 |" not in line)  # -c too small
    runner = FakeRunner(peers.Completed(0, without_4, ""))
    out = peers.llama_batched_bench(
        Path("/bin/bb"), Path("m.gguf"), new_tokens=64, sequences=[1, 4, 16], threads=2, runner=runner
    )
    assert runner.calls[0][0] == "/bin/bb"
    assert out["by_sequences"]["16"]["decode_tokens_per_s"] == 24.19
    assert out["by_sequences"]["1"]["prompt_tokens_per_s"] == 346.42
    assert out["missing_sequences"] == [4] and "4" not in out["by_sequences"]


def test_a_failed_batched_bench_is_a_one_line_note() -> None:
    runner = FakeRunner(peers.Completed(1, "", "loading...\nerror: unable to load model\n"))
    out = peers.llama_batched_bench(Path("/x/llama-batched-bench"), Path("m.gguf"), new_tokens=64, sequences=[1],
                                    threads=2, runner=runner)  # fmt: skip
    assert out == {"skipped": "llama-batched-bench exited 1: error: unable to load model"}
    garbled = FakeRunner(peers.Completed(0, "no table here", ""))
    out = peers.llama_batched_bench(Path("bb"), Path("m.gguf"), new_tokens=64, sequences=[1], threads=2, runner=garbled)
    assert "no table" in out["skipped"]


# --- llama-cpp-python at one stream -----------------------------------------------------------------------------------


def _child_stdout(runs: list[list[float]], **extra: Any) -> str:
    result = {
        "version": "0.3.36",
        "load_s": 0.12,
        "prompt_ids": [1, 2, 3],
        "eog_suppressed": [0, 2, 4],
        "runs": [{"tokens": len(times), "token_times_s": times} for times in runs],
        "text": "Once upon a time",
        **extra,
    }
    return "llama_model_loader: noise\n" + peers.RESULT_MARK + json.dumps(result) + "\n"


def test_the_childs_runs_summarize_like_the_servers_one_stream() -> None:
    runs = [[0.10, 0.11, 0.13, 0.14], [0.20, 0.21, 0.22, 0.25], [0.30, 0.32, 0.33, 0.40]]
    summary = peers.one_stream_summary(peers.parse_child(_child_stdout(runs)))
    assert summary["runs"] == 3 and summary["tokens"] == 4 and summary["prompt_tokens"] == 3
    assert summary["ttft_ms"] == 200.0  # the median run's first token
    # gaps over every run: 10, 20, 10, 10, 10, 30, 20, 10, 70 ms; P90 = 30 + 0.2 x (70 - 30)
    assert summary["itl_p50_ms"] == 10.0 and summary["itl_p90_ms"] == pytest.approx(38.0)
    assert summary["per_run_tokens_per_s"] == [28.57, 16.0, 10.0]  # tokens / the last token's time
    assert summary["tokens_per_s"] == 16.0
    assert summary["eos"] == "ignored: logit bias -inf on the 3 end-of-generation tokens"


def test_a_child_result_that_is_missing_or_malformed_is_refused() -> None:
    with pytest.raises(peers.PeerError, match="no result line"):
        peers.parse_child("Traceback (most recent call last):\n")
    with pytest.raises(peers.PeerError, match="not JSON"):
        peers.parse_child(peers.RESULT_MARK + "{oops\n")
    with pytest.raises(peers.PeerError, match="no runs"):
        peers.parse_child(_child_stdout([]))
    with pytest.raises(peers.PeerError, match="do not increase"):
        peers.parse_child(_child_stdout([[0.1, 0.3, 0.2]]))


def test_the_one_stream_peer_passes_the_prompt_and_compares_its_ids() -> None:
    runner = FakeRunner(peers.Completed(0, _child_stdout([[0.1, 0.2]]), ""))
    python, gguf = Path("/peers/venv/bin/python"), Path("/m/model.gguf")
    out = peers.llama_python_one_stream(python, gguf, "<|im_start|>user\nhi", new_tokens=64, threads=2, runs=3,
                                        prompt_ids=[1, 2, 3], runner=runner)  # fmt: skip
    [argv] = runner.calls
    assert argv[:2] == [str(python), "-c"]
    config = json.loads(argv[3])
    assert config["prompt"] == "<|im_start|>user\nhi" and config["gguf"] == str(gguf)
    assert (config["new_tokens"], config["threads"], config["runs"]) == (64, 2, 3)
    assert out["same_prompt_ids_as_sagebox"] is True and out["tokens_per_s"] == 10.0  # 2 tokens in 0.2 s
    other = peers.llama_python_one_stream(python, gguf, "x", new_tokens=64, threads=2, runs=1, prompt_ids=[9],
                                          runner=runner)  # fmt: skip
    assert other["same_prompt_ids_as_sagebox"] is False


def test_a_child_that_fails_is_a_one_line_note() -> None:
    runner = FakeRunner(peers.Completed(1, "", "Traceback ...\nModuleNotFoundError: No module named 'llama_cpp'\n"))
    out = peers.llama_python_one_stream(Path("/usr/bin/python3"), Path("m.gguf"), "x", new_tokens=4, threads=1,
                                        runs=1, runner=runner)  # fmt: skip
    assert out == {"skipped": "python3 exited 1: ModuleNotFoundError: No module named 'llama_cpp'"}


FAKE_LLAMA_CPP = '''
"""A stand-in for llama_cpp: a model that would end at once (EOS, token 2) unless the sampler biases EOS away."""
import ctypes

__version__ = "fake"
EOS = 2
log = {"prompt_evals": 0}


class llama_logit_bias(ctypes.Structure):
    _fields_ = [("token", ctypes.c_int32), ("bias", ctypes.c_float)]


class Llama:
    def __init__(self, model_path, n_ctx, n_threads, n_threads_batch, verbose):
        assert n_threads == n_threads_batch == 2 and verbose is False
        self.model, self.ctx, self.n_tokens = "model", "ctx", 0

    def tokenize(self, text, add_bos, special):
        assert add_bos is False and special is True
        return [ord(c) for c in text.decode()]

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        if self.n_tokens == 0 and len(tokens) > 1:
            log["prompt_evals"] += 1
        self.n_tokens += len(tokens)

    def detokenize(self, tokens):
        return " ".join(map(str, tokens)).encode()


def llama_model_get_vocab(model): return "vocab"
def llama_vocab_n_tokens(vocab): return 10
def llama_vocab_is_eog(vocab, token): return token in (EOS, 7)
def llama_sampler_chain_default_params(): return None
def llama_sampler_chain_init(params): return {"banned": set(), "step": 0}
def llama_sampler_init_logit_bias(n_vocab, n, biases):
    return {"bias": {b.token for b in biases if b.bias == float("-inf")}}
def llama_sampler_init_greedy(): return {"greedy": True}
def llama_sampler_chain_add(chain, sampler): chain["banned"] |= sampler.get("bias", set())
def llama_sampler_reset(chain): chain["step"] = 0
def llama_sampler_free(chain): pass
def llama_sampler_sample(chain, ctx, idx):
    chain["step"] += 1
    return 5 if EOS in chain["banned"] else EOS
def llama_print_system_info(): return f"prompt evals {log['prompt_evals']}".encode()
'''


def test_the_child_program_ignores_eos_and_evaluates_the_prompt_every_run(tmp_path: Path) -> None:
    (tmp_path / "llama_cpp.py").write_text(FAKE_LLAMA_CPP)
    argv = peers.python_argv(Path(sys.executable), Path("m.gguf"), "hello", new_tokens=6, threads=2, runs=3)
    done = peers.run_process([argv[0], "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + argv[2],
                              *argv[3:]], 30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = peers.parse_child(done.stdout)
    assert result["eog_suppressed"] == [2, 7] and result["prompt_ids"] == [ord(c) for c in "hello"]
    assert [run["tokens"] for run in result["runs"]] == [6, 6, 6]
    assert result["text"] == "5 5 5 5 5 5"  # never EOS: the bias is in the sampler chain
    # a warm-up and three runs, each from an empty cache (no prefix reused)
    assert result["system_info"] == "prompt evals 4"


# --- where the peers are ----------------------------------------------------------------------------------------------


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_peers_are_found_where_make_peers_builds_them(tmp_path: Path) -> None:
    python = _executable(tmp_path / "venv" / "bin" / "python")
    bench_bin = _executable(tmp_path / "build" / "bin" / "llama-batched-bench")
    found = peers.find_peers(root=tmp_path)
    assert (found.python, found.batched_bench, dict(found.notes)) == (python, bench_bin, {})


def test_missing_peers_get_notes_not_paths(tmp_path: Path) -> None:
    (tmp_path / "python").write_text("not executable")
    found = peers.find_peers(python=tmp_path / "python", root=tmp_path / "nothing")
    assert found.python is None and found.batched_bench is None
    assert found.notes["python"] == f"--llama-python {tmp_path / 'python'} is not an executable file"
    assert "make peers" in found.notes["batched_bench"] and str(tmp_path / "nothing") in found.notes["batched_bench"]


def _args(**overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "skip_llama": False,
        "peer_gguf": None,
        "model": None,
        "llama_python": None,
        "llama_batched_bench": None,
    }
    return argparse.Namespace(**{**values, **overrides})


def test_absent_peers_are_skipped_with_a_note_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(bench, "find_peers", lambda python, batched: peers.find_peers(python, batched, tmp_path / "no"))
    out = bench.llama_peers(_args(model=[str(gguf)]), tmp_path, ["model.gguf"], [1, 4, 16], lambda line: None)
    assert out["gguf"] == str(gguf)
    assert "make peers" in out["python"]["skipped"] and "make peers" in out["batched_bench"]["skipped"]
    assert bench.llama_peers(_args(skip_llama=True), tmp_path, [], [1], print)["python"] == {"skipped": "--skip-llama"}


def test_the_peers_gguf_is_given_or_a_model_or_the_demos_the_models_came_from(tmp_path: Path) -> None:
    demo = tmp_path / "SmolLM2.gguf"
    demo.write_bytes(b"GGUF")
    given = tmp_path / "given.gguf"
    given.write_bytes(b"GGUF")
    assert bench.peer_gguf(given, [], [], lambda: demo) == (given, "")
    assert bench.peer_gguf(tmp_path / "absent.gguf", [], [], lambda: demo)[0] is None
    assert bench.peer_gguf(None, ["/a/dir", str(given)], ["x"], lambda: demo) == (given, "")
    assert bench.peer_gguf(None, ["/a/dir", "/b/dir"], ["SmolLM2.gguf", "SmolLM2.gguf"], lambda: demo) == (demo, "")
    path, why = bench.peer_gguf(None, ["/a/dir"], ["gpt2"], lambda: demo)
    assert path is None and "--peer-gguf" in why and "gpt2" in why


# --- Sagebox over the peers -------------------------------------------------------------------------------------------


def test_ratios_divide_each_variant_by_the_peers_and_skip_what_is_missing() -> None:
    batched = peers.batched_summary(peers.parse_batched_table(BATCHED_STDOUT), [1, 4, 16])
    transformers = {"batch_1": {"tokens_per_s": 40.0}, "batch_16": {"tokens_per_s": 300.0}}
    ratios = peers.peer_ratios(60.0, 96.76, 16, {"tokens_per_s": 80.0}, batched, transformers)
    assert ratios == {
        "one_stream_over_llama_cpp_python": 0.75,
        "one_stream_over_transformers_batch_1": 1.5,
        "streams_16_over_batched_bench_decode_16": 4.0,
    }
    with_decode = peers.peer_ratios(60.0, 96.76, 16, {"tokens_per_s": 80.0}, batched, transformers, 120.95)
    assert with_decode["streams_16_decode_over_batched_bench_decode_16"] == 5.0
    none = peers.peer_ratios(60.0, 96.0, 16, {"skipped": "absent"}, {"skipped": "absent"}, None)
    assert set(none.values()) == {None}
    eight = peers.peer_ratios(60.0, 96.0, 8, {"tokens_per_s": 0.0}, batched, None)
    assert eight == {  # no 8-sequence row, a zero rate: no ratio rather than a division by zero
        "one_stream_over_llama_cpp_python": None,
        "one_stream_over_transformers_batch_1": None,
        "streams_8_over_batched_bench_decode_8": None,
    }


def test_variants_are_labelled_and_generate_runs_on_the_fp32_one() -> None:
    assert bench.variant_labels(["int8", "fp32", "fp32"]) == ["int8", "fp32", "fp32-2"]
    assert bench.reference_label({"int8": "int8", "fp32": "fp32"}) == "fp32"
    assert bench.reference_label({"int8": "int8"}) == "int8"


def _server(one: float, sixteen: float) -> dict[str, Any]:
    return {
        "one_stream": {"tokens": 64, "tokens_per_s": one, "ttft_ms": 50.0, "inter_token": {"p50_ms": 9.0}},
        "streams_16": {"tokens": 1024, "aggregate_tokens_per_s": sixteen, "ttft": {}, "inter_token": {}},
        "ratio_16_streams_over_one": round(sixteen / one, 2),
    }


def test_the_table_shows_every_variant_every_peer_and_the_ratios() -> None:
    batched = peers.batched_summary(peers.parse_batched_table(BATCHED_STDOUT), [1, 16])
    python = {"tokens": 64, "tokens_per_s": 87.7, "ttft_ms": 140.0, "itl_p50_ms": 9.2, "itl_p90_ms": 10.4}
    servers = {"fp32": _server(30.0, 90.0), "int8": _server(45.0, 120.0)}
    report: dict[str, Any] = {
        "setup": {"streams": [1, 16]},
        "server": servers["fp32"],
        "servers": servers,
        "llama_cpp": {"python": python, "batched_bench": batched},
        "transformers": {"batch_1": {"batch": 1, "tokens": 64, "tokens_per_s": 20.0}},
        "ratios": {"int8": peers.peer_ratios(45.0, 120.0, 16, python, batched, {"batch_1": {"tokens_per_s": 20.0}})},
        "cost": {"note": "NOT a measurement", "per_variant": {"int8": {"16_streams": {"ml.c6i.xlarge": 1.5}}},
                 "usd_per_million_output_tokens": {}},
    }  # fmt: skip
    text = "\n".join(bench.table(report))
    for row in ("fp32 server, 1 stream", "int8 server, 16 streams", "llama-cpp-python, 1 stream",
                "llama-batched-bench decode, 16 seq", "transformers, batch 1"):  # fmt: skip
        assert row in text
    ratios = "int8 tokens/s: 1 stream / llama-cpp-python 1 stream x0.51, 1 stream / generate() batch 1 x2.25, "
    assert ratios + "16 streams / llama-batched-bench decode at 16 x4.96" in text
    assert "int8: $ per 1M output tokens at 16 streams: ml.c6i.xlarge $1.50" in text
    assert "llama-batched-bench prompt tokens/s (128-token prompts): 1 seq 346.4, 16 seq 148.1" in text
    skipped = {**report, "llama_cpp": {"python": {"skipped": "not found"}, "batched_bench": {"skipped": "gone"}}}
    text = "\n".join(bench.table(skipped))
    assert "llama-cpp-python: skipped: not found" in text and "llama-batched-bench: skipped: gone" in text
    assert "llama-cpp-python, 1 stream" not in text
