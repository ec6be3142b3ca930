"""The neuron handler on a tensor-parallel neuron_emu model: one neuron_emu.parallel directory per bucket, served by
worker processes (the stand-in for NeuronCores) that the handler starts at load and stops at close."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
import torch

import neuron_emu
from container.handlers import Closable, HandlerError, RuntimeOptions, close_handler, handler_for
from container.handlers.neuron import NeuronHandler, parallel_bucket_dir, parallel_model_file, threads_per_worker
from container.manifest import CompileSpec, Manifest, SourceSpec, TokenizerSpec, hash_files, load_verified, parse
from neuron_emu import parallel
from tests.neuron_emu.conftest import QAWrapper

BUCKETS = [16, 32]
DEGREE = 2
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
EXIT_DEADLINE_S = 60.0  # how long exited workers may take to be reaped on a loaded machine (not a speed claim)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def still_alive(pids: Iterable[int]) -> list[int]:
    deadline = time.monotonic() + EXIT_DEADLINE_S
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if alive(pid)]
    return left


def write_tp_model_dir(model: torch.nn.Module, directory: Path) -> Manifest:
    """What `sagebox compile --tensor-parallel 2` writes, by hand: tp/seq<L>/ per bucket and a manifest."""
    for bucket in BUCKETS:
        ones = torch.ones(1, bucket, dtype=torch.long)
        sharded = parallel.trace(model, (ones, ones.clone(), torch.zeros_like(ones)), tp_degree=DEGREE)
        sharded.dynamic_batch()
        sharded.save(directory / parallel_bucket_dir(bucket))
        sharded.close()
    (directory / "tokenizer.json").write_text("{}")
    manifest = Manifest(
        tool_version="0.1.0",
        variant="neuron",
        runtime="neuron",
        model_file=parallel_model_file(BUCKETS[0]),
        tokenizer=TokenizerSpec(max_length=64),
        sequence_buckets=BUCKETS,
        source=SourceSpec(name="tiny-bert", architecture="bert"),
        compile=CompileSpec(
            compiler="test",
            auto_cast="matmult",
            auto_cast_type="bf16",
            tensor_parallel=DEGREE,
            num_attention_heads=4,
        ),
        files=hash_files(directory),
    )
    (directory / "manifest.json").write_text(manifest.to_json())
    return load_verified(directory)


@pytest.fixture(scope="module")
def tp_model_dir(tiny_qa: QAWrapper, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("neuron_tp")
    write_tp_model_dir(tiny_qa, directory)
    return directory


def features(batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 100 + seq)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[0, seq // 2 :] = 0
    return {
        "input_ids": rng.integers(5, 1000, (batch, seq), dtype=np.int64),
        "attention_mask": mask,
        "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
    }


def test_threads_are_shared_among_the_workers() -> None:
    assert threads_per_worker(4, 2) == 2
    assert threads_per_worker(2, 2) == 1
    assert threads_per_worker(2, 4) == 1  # at least one each
    assert threads_per_worker(5, 2) == 2  # never more than the runtime's threads together


@pytest.mark.slow  # ~10 s each on this 2-core machine: trace once, start 2 workers per bucket
def test_every_bucket_and_batch_answers_like_the_single_core_graph(tp_model_dir: Path, tiny_qa: QAWrapper) -> None:
    handler = handler_for("neuron")
    assert isinstance(handler, NeuronHandler) and isinstance(handler, Closable)
    handler.load(tp_model_dir, load_verified(tp_model_dir), RuntimeOptions(threads=2))
    try:
        pids = handler.worker_pids
        assert len(pids) == DEGREE * len(BUCKETS) and all(alive(pid) for pid in pids)
        for seq in BUCKETS:
            ones = torch.ones(1, seq, dtype=torch.long)
            single = neuron_emu.trace(tiny_qa, (ones, ones.clone(), torch.zeros_like(ones)))
            neuron_emu.dynamic_batch(single)
            for batch in (1, 3, 8):
                inputs = features(batch, seq)
                start, end = handler.predict(inputs)
                assert start.dtype == np.float32 and start.shape == end.shape == (batch, seq)
                args = [torch.from_numpy(inputs[name]) for name in MODEL_INPUTS]
                with torch.no_grad():
                    reference = single(*args)
                    fp32 = tiny_qa(*args)
                for got, one_core, cpu in zip((start, end), reference, fp32, strict=True):
                    # The auto-cast tolerance of tests/neuron_emu/parallel: the sharded graphs add their fp32
                    # partial sums in another order, so they may differ from the single-core graph by at most
                    # twice its own distance from fp32 (plus 1e-5 of the logit scale).
                    cast_error = float((one_core - cpu).abs().max())
                    bound = 2 * cast_error + 1e-5 * max(1.0, float(cpu.abs().max()))
                    assert float(np.abs(got - one_core.numpy()).max()) <= bound
    finally:
        close_handler(handler)
    assert still_alive(pids) == []
    assert handler.worker_pids == []
    with pytest.raises(HandlerError, match="before load"):
        handler.predict(features(1, BUCKETS[0]))
    close_handler(handler)  # twice is harmless


@pytest.mark.slow  # ~10 s each on this 2-core machine: trace once, start 2 workers per bucket
def test_an_artifact_saved_without_dynamic_batch_serves_any_batch_and_stays_untouched(
    tp_model_dir: Path, tmp_path: Path
) -> None:
    directory = _copy(tp_model_dir, tmp_path)
    for bucket in BUCKETS:
        path = directory / parallel_model_file(bucket)
        path.write_text(json.dumps({**json.loads(path.read_text()), "dynamic_batch": False}))
    manifest = _rewrite(directory)
    handler = NeuronHandler()
    handler.load(directory, manifest, RuntimeOptions(threads=1))
    try:
        start, _ = handler.predict(features(5, BUCKETS[1]))
        assert start.shape == (5, BUCKETS[1])
    finally:
        handler.close()
    assert load_verified(directory) == manifest  # enabled in memory; the verified parallel.json is unchanged
    assert json.loads((directory / parallel_model_file(BUCKETS[0])).read_text())["dynamic_batch"] is False


def _copy(tp_model_dir: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "copy"
    shutil.copytree(tp_model_dir, directory)
    return directory


def _rewrite(directory: Path, **compile_fields: object) -> Manifest:
    """The directory's manifest with `compile_fields` changed, listing (and hashing) the files there now."""
    manifest = parse((directory / "manifest.json").read_text())
    assert manifest.compile is not None
    changed = manifest.model_copy(
        update={
            "compile": manifest.compile.model_copy(update=compile_fields),
            "files": hash_files(directory),
        }
    )
    (directory / "manifest.json").write_text(changed.to_json())
    return load_verified(directory)


def _our_workers() -> set[int]:
    """Live processes whose command line is neuron_emu's worker/fork server, started from this process tree."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"neuron_emu.parallel.worker" in cmdline and alive(int(entry)) and _descends_from(int(entry), os.getpid()):
            found.add(int(entry))
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is on pid's parent chain. make test runs files on several xdist workers at once, and
    another worker's Neuron tests start fork servers and workers of their own (CI once counted four of them here)."""
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == ancestor:
            return True
    return False


@pytest.mark.slow  # ~10 s each on this 2-core machine: trace once, start 2 workers per bucket
def test_refusals_are_one_line_and_leave_no_worker(tp_model_dir: Path, tmp_path: Path) -> None:
    directory = _copy(tp_model_dir, tmp_path)
    serving = NeuronHandler()  # the count below sees a loaded model's workers, so an empty leftover set means something
    serving.load(directory, load_verified(directory), RuntimeOptions(threads=2))
    try:
        assert serving.worker_pids and set(serving.worker_pids) <= _our_workers()
    finally:
        close_handler(serving)
    before = _our_workers()
    # The manifest says 4 cores; the saved graphs are sharded over 2.
    wrong_degree = _rewrite(directory, tensor_parallel=4)
    with pytest.raises(HandlerError) as caught:
        NeuronHandler().load(directory, wrong_degree, RuntimeOptions(threads=2))
    assert str(caught.value) == "tp/seq16 is sharded over 2 cores; the manifest says tensor_parallel 4"
    # A bucket whose sharded graphs the manifest does not list.
    shutil.rmtree(directory / parallel_bucket_dir(BUCKETS[1]))
    missing = _rewrite(directory, tensor_parallel=2)
    with pytest.raises(HandlerError) as caught:
        NeuronHandler().load(directory, missing, RuntimeOptions(threads=2))
    assert str(caught.value) == (
        "the manifest records tensor_parallel 2 but lists no sharded graphs for sequence buckets [32] (tp/seq32)"
    )
    # A bucket directory holding something else: one line from neuron_emu, as a HandlerError.
    (directory / parallel_bucket_dir(BUCKETS[1])).mkdir(parents=True)
    (directory / parallel_model_file(BUCKETS[1])).write_text("{}")
    broken = _rewrite(directory)
    with pytest.raises(HandlerError, match=r"^the tensor-parallel Neuron model cannot be loaded: .*parallel\.json"):
        NeuronHandler().load(directory, broken, RuntimeOptions(threads=2))
    assert still_alive(_our_workers() - before) == []  # every failed load stopped the workers it had started


def _ids(pid: int) -> tuple[list[int], list[int]]:
    """(real, effective, saved, fs) uids and gids of a live process, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return [int(v) for v in fields["Uid"].split()], [int(v) for v in fields["Gid"].split()]


@pytest.mark.slow  # ~10 s on this 2-core machine: trace once, start 2 workers per bucket
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the server starts as root, as SageMaker runs containers")
def test_workers_follow_a_root_server_to_its_service_user_and_keep_answering(
    tp_model_dir: Path, tmp_path: Path
) -> None:
    from neuron_emu.parallel.group import ForkServer

    # The SageMaker layout: the model untarred as root, readable by root only.
    directory = _copy(tp_model_dir, tmp_path)
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    handler = NeuronHandler()
    handler.load(directory, load_verified(directory), RuntimeOptions(threads=2))
    try:
        inputs = features(2, BUCKETS[1])
        before = handler.predict(inputs)
        server = ForkServer._shared
        assert server is not None
        processes = [*handler.worker_pids, server.process.pid]
        assert all(_ids(pid)[0] == [0, 0, 0, 0] for pid in processes)

        handler.serve_as(10001, 10001)  # no such account is needed: the ids are taken as given

        for pid in processes:  # real, effective, saved and filesystem ids: no way back to root
            assert _ids(pid) == ([10001] * 4, [10001] * 4), pid
        # Models loaded later in this process (as root) get a fork server of their own, not the dropped one: they
        # can still read the root-only model.
        assert ForkServer._shared is not server
        later = NeuronHandler()
        later.load(directory, load_verified(directory), RuntimeOptions(threads=2))
        try:
            assert all(_ids(pid)[0] == [0, 0, 0, 0] for pid in later.worker_pids)
            for got, expected in zip(later.predict(inputs), before, strict=True):
                np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
        finally:
            close_handler(later)
        after = handler.predict(inputs)  # the graphs were loaded as root and stay in memory
        for got, expected in zip(after, before, strict=True):
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
        handler.serve_as(10001, 10001)  # asking again for the identity they have is harmless
        # Dropped for good: another identity is refused in one line (the server then fails the model and closes it).
        with pytest.raises(HandlerError, match=r"^the tensor-parallel workers could not drop to uid 10002: .*Perm"):
            handler.serve_as(10002, 10002)
    finally:
        close_handler(handler)
    assert still_alive(processes[:-1]) == []
