"""Saving, loading in this process and in a fresh serving process, and cleaning up the worker processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import torch

import neuron_emu
from neuron_emu import parallel
from neuron_emu.errors import ArtifactError
from neuron_emu.parallel.artifact import MANIFEST_FILE, PLAN_FILE
from neuron_emu.parallel.module import ParallelModel
from tests.neuron_emu.conftest import REPO
from tests.neuron_emu.parallel.conftest import Inputs, make_inputs

EXIT_DEADLINE_S = 60.0  # how long gone processes may take to be reaped on a loaded machine (not a speed claim)


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _wait_gone(pids: Iterable[int]) -> list[int]:
    """Poll until every pid has exited (or the deadline passes); the ones still alive."""
    deadline = time.monotonic() + EXIT_DEADLINE_S
    left = [pid for pid in pids if _alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if _alive(pid)]
    return left


def test_saved_model_loads_with_one_call_and_answers_like_the_traced_one(
    saved_tp2: Path, sharded: Callable[[int], ParallelModel], qa_inputs: Inputs
) -> None:
    names = sorted(p.name for p in saved_tp2.iterdir())
    assert names == sorted([MANIFEST_FILE, PLAN_FILE, "rank0.pt", "rank1.pt"])
    # Every rank's segments are neuron_emu traced graphs with their own cost plans.
    shard = neuron_emu.load(saved_tp2 / "rank1.pt")
    assert int(shard.count) == 5 and int(shard.rank) == 1
    assert neuron_emu.describe(shard.segment0)["auto_cast_type"] == "bf16"

    expected = sharded(2)(*qa_inputs)
    model = parallel.load(saved_tp2)
    try:
        assert model.running and len(model.worker_pids) == 2
        got = model(*qa_inputs)
        for g, e in zip(got, expected, strict=True):
            assert torch.equal(g, e)
        info = model.describe()
        assert (info["tp_degree"], info["input_shapes"]) == (2, [[2, 16]] * 3)
        assert info["compiler_args"].startswith("--auto-cast matmult --auto-cast-type bf16")
        pids = model.worker_pids
    finally:
        model.close()
    assert [pid for pid in pids if _alive(pid)] == []  # close() returns once its workers have exited
    assert model.worker_pids == [] and not model.running
    with pytest.raises(ArtifactError, match="closed") as failure:
        model(*qa_inputs)
    assert "\n" not in str(failure.value)


def test_dynamic_batch_then_a_dead_worker_fails_the_call_in_one_line(saved_tp2: Path, tmp_path: Path) -> None:
    directory = tmp_path / "copy"
    shutil.copytree(saved_tp2, directory)
    model = parallel.load(directory)
    try:
        model.dynamic_batch()
        assert json.loads((directory / MANIFEST_FILE).read_text())["dynamic_batch"] is True
        ids, mask, types = make_inputs(3, 16, seed=5)
        start, end = model(ids, mask, types)
        assert start.shape == end.shape == (3, 16)
        head = model(ids[:2], mask[:2], types[:2])
        tail = model(*(x[2:].repeat(2, 1) for x in (ids, mask, types)))
        assert torch.equal(start[:2], head[0]) and torch.equal(start[2], tail[0][0])

        pids = model.worker_pids
        os.kill(pids[1], signal.SIGKILL)  # a worker this test started, by its id
        with pytest.raises(ArtifactError, match="rank 1") as failure:
            model(ids, mask, types)
        assert "\n" not in str(failure.value)
        assert _wait_gone(pids) == []  # rank 0 and the launcher went down with it
        with pytest.raises(ArtifactError, match="load the model again"):
            model(ids, mask, types)
    finally:
        model.close()


def test_broken_artifacts_fail_to_load_in_one_line(saved_tp2: Path, tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match=r"no parallel\.json") as failure:
        parallel.load(tmp_path)
    assert "\n" not in str(failure.value)
    directory = tmp_path / "corrupt"
    shutil.copytree(saved_tp2, directory)
    (directory / "rank1.pt").write_bytes(b"not a TorchScript archive")
    with pytest.raises(ArtifactError, match="rank 1 failed while starting") as failure:
        parallel.load(directory)
    assert "\n" not in str(failure.value)


def test_inputs_are_checked_before_they_reach_the_workers(sharded: Callable[[int], ParallelModel]) -> None:
    model = sharded(1)
    ids, mask, types = make_inputs(2, 20, seed=1)
    with pytest.raises(ArtifactError, match=r"shape \[2, 20\]; the model was traced for \[2, 16\]") as failure:
        model(ids, mask, types)
    assert "\n" not in str(failure.value)
    with pytest.raises(ArtifactError, match=r"dtype torch\.float32"):
        model(ids.float()[:, :16], mask[:, :16], types[:, :16])


SERVE = """
import json, os, signal, sys
import torch
import neuron_emu.parallel as parallel
from neuron_emu.parallel.group import ForkServer

ids, mask, types = (torch.tensor(x) for x in json.loads(sys.argv[2]))
first = parallel.load(sys.argv[1])
first_server = ForkServer._shared.process
first(ids, mask, types)
first.close()  # the last open model: its fork server exits with it
first_server_exit = first_server.poll()
model = parallel.load(sys.argv[1])
start, end = model(ids, mask, types)
print(json.dumps({
    "start": start.tolist(), "end": end.tolist(), "first_server_exit": first_server_exit,
    "pids": model.worker_pids, "server": ForkServer._shared.process.pid,
}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # die without closing anything: nothing we started may outlive us
"""


def test_a_serving_process_loads_runs_and_leaves_no_orphans_when_killed(
    saved_tp2: Path, sharded: Callable[[int], ParallelModel], qa_inputs: Inputs
) -> None:
    arguments = json.dumps([x.tolist() for x in qa_inputs])
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SERVE), str(saved_tp2), arguments],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    served = json.loads(result.stdout.strip().splitlines()[-1])
    expected = sharded(2)(*qa_inputs)
    assert torch.equal(torch.tensor(served["start"]), expected[0])
    assert torch.equal(torch.tensor(served["end"]), expected[1])
    assert served["first_server_exit"] == 0
    assert len(served["pids"]) == 2
    assert _wait_gone([*served["pids"], served["server"]]) == []
