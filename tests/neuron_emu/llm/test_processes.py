"""The "processes" executor: one worker process per rank (gloo all-reduces) gives the in-process executor's logits
and tokens, leaves no process behind on close, and turns a dead worker into one line, not a hang."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.llm import CompiledDecoder, NeuronDecoder, compile_decoder, load
from neuron_emu.llm.errors import ContextLengthError, DecoderInputError
from neuron_emu.parallel.group import ForkServer
from tests.neuron_emu.llm.tiny import inputs, prompt, tiny_model

# A guard, not a speed claim: a step the workers do not answer within it fails (in one line) instead of hanging.
STEP_TIMEOUT_S = 120.0


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.fixture(scope="module")
def fork_server() -> Iterator[ForkServer]:
    """One warm fork server for the module: each decoder's workers fork from it instead of importing torch anew."""
    server = ForkServer.acquire()
    yield server
    server.release()


def _compiled(auto_cast: str) -> CompiledDecoder:
    raw, weights = inputs(tiny_model("llama", positions=64))  # GQA: 2 key/value heads, split over 2 ranks
    return compile_decoder(raw, weights, tp_degree=2, batch_size=2, buckets=(32, 64), auto_cast=auto_cast)


def _run(decoder: NeuronDecoder) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens on line 0 crossing the 32 bucket, then two lines decoding together: (tokens, every logits)."""
    tokens = decoder.generate(prompt(61, 9), 30)
    first = decoder.context_encode(1, prompt(62, 5))
    logits = [first, decoder.context_encode(0, prompt(63, 4))]
    step = decoder.token_generate({0: int(logits[1].argmax()), 1: int(first.argmax())}, {0: 4, 1: 5})
    logits += [step[0], step[1]]
    assert decoder.last_bucket == ("token", 32) and decoder.lengths() == [5, 6]
    return tokens, logits


@pytest.mark.parametrize("auto_cast", ["none", "matmult"])
def test_worker_processes_give_the_in_process_tokens_and_logits(
    auto_cast: str, tmp_path: Path, fork_server: ForkServer
) -> None:
    compiled = _compiled(auto_cast)
    expected_tokens, expected_logits = _run(compiled)
    directory = compiled.save(tmp_path / "decoder")
    with load(directory, executor="processes", step_timeout_s=STEP_TIMEOUT_S) as decoder:
        assert decoder.executor == "processes" and len(decoder.worker_pids) == 2 and decoder.caches == []
        assert (decoder.tp_degree, decoder.batch_size, decoder.buckets, decoder.max_length, decoder.auto_cast) == (
            2, 2, (32, 64), 64, auto_cast,
        )  # fmt: skip
        tokens, logits = _run(decoder)
        assert tokens == expected_tokens
        # Two ranks: gloo's sum of two partials is the in-process sum (a + b == b + a), so the logits are equal.
        assert all(torch.equal(a, b) for a, b in zip(logits, expected_logits, strict=True))
        with pytest.raises(ContextLengthError, match="past max_length 64"):
            decoder.context_encode(0, [5] * 65)
        with pytest.raises(DecoderInputError, match="would leave a gap"):
            decoder.token_generate({1: 3}, {1: 9})
        assert decoder.describe()["executor"] == "processes"
    if auto_cast == "none":  # the same keyword at compile time: workers started on a scratch copy of the files
        compiled.close()
        with compile_decoder(
            *inputs(tiny_model("llama", positions=64)), tp_degree=2, batch_size=2, buckets=(32, 64),
            auto_cast=auto_cast, executor="processes",
        ) as started:  # fmt: skip
            assert isinstance(started, CompiledDecoder) and started.executor == "processes"
            assert _run(started)[0] == expected_tokens
            started.save(tmp_path / "again")  # the parent keeps the graphs and weights to save them
        assert load(tmp_path / "again").generate(prompt(61, 9), 30) == expected_tokens


def test_close_leaves_no_worker_alive(tmp_path: Path, fork_server: ForkServer) -> None:
    directory = _compiled("none").save(tmp_path / "decoder")
    decoder = load(directory, executor="processes", step_timeout_s=STEP_TIMEOUT_S)
    pids = decoder.worker_pids
    assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    decoder.generate(prompt(64, 3), 2)
    decoder.close()  # returns once they have exited
    assert [pid for pid in pids if _alive(pid)] == [] and decoder.worker_pids == []
    with pytest.raises(ArtifactError, match="the decoder is closed"):
        decoder.generate(prompt(64, 3), 2)
    decoder.close()  # again: nothing to do


def test_a_killed_worker_fails_the_next_call_in_one_line(tmp_path: Path, fork_server: ForkServer) -> None:
    directory = _compiled("none").save(tmp_path / "decoder")
    decoder = load(directory, executor="processes", step_timeout_s=STEP_TIMEOUT_S)
    try:
        decoder.context_encode(0, prompt(65, 4))
        pids = decoder.worker_pids
        os.kill(pids[1], signal.SIGKILL)  # a worker this test started, by its id
        with pytest.raises(ArtifactError, match=r"neuron_emu\.llm: worker rank 1 exited") as failure:
            decoder.token_generate({0: 7}, {0: 4})
        assert "\n" not in str(failure.value)
        assert [pid for pid in pids if _alive(pid)] == []  # rank 0 was stopped with it
        assert decoder.lengths() == [0, 0]  # the line being written was emptied
        with pytest.raises(ArtifactError, match="the workers stopped earlier") as failure:
            decoder.context_encode(0, prompt(65, 4))
        assert "\n" not in str(failure.value)
    finally:
        decoder.close()


def test_an_unknown_executor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="executor 'threads' is not one of: in_process, processes"):
        load(tmp_path, executor="threads")
    with pytest.raises(ArtifactError, match="apply to executor='processes' only"):
        load(tmp_path, step_timeout_s=1.0)
