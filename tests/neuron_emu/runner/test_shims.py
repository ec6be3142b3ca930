"""The stand-in torch_xla / torch_neuronx functions: one device, world size 1, and clear refusals."""

from __future__ import annotations

import importlib
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from neuron_emu.errors import CustomOpBuildError, CustomOpLoadError
from neuron_emu.runner.finder import shim_imports
from neuron_emu.shims import NotEmulatedError


@pytest.fixture
def xm() -> Iterator[ModuleType]:
    with shim_imports():
        yield importlib.import_module("torch_xla.core.xla_model")


@pytest.fixture
def torch_xla() -> Iterator[ModuleType]:
    with shim_imports():
        yield importlib.import_module("torch_xla")


def test_one_device_one_replica(xm: ModuleType) -> None:
    assert xm.xla_device() == torch.device("cpu")
    assert xm.xla_device(0) == torch.device("cpu")
    assert xm.get_ordinal() == 0 and xm.get_local_ordinal() == 0
    assert xm.xrt_world_size() == 1
    assert xm.is_master_ordinal() and xm.is_master_ordinal(local=False)
    assert xm.xla_device_hw(xm.xla_device()) == "NEURON"
    assert xm.is_xla_tensor(torch.zeros(1))
    assert xm.get_xla_supported_devices() == ["xla:0"]


def test_a_second_device_is_refused_in_one_line(xm: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"one device per process") as caught:
        xm.xla_device(1)
    assert "\n" not in str(caught.value)


def test_step_closures_run_at_the_next_mark_step_in_order(xm: ModuleType) -> None:
    calls: list[tuple[str, int]] = []
    xm.add_step_closure(lambda tag, n: calls.append((tag, n)), args=("a", 1))
    xm.add_step_closure(lambda tag, n: calls.append((tag, n)), args=("b", 2))
    assert calls == []
    xm.mark_step()
    assert calls == [("a", 1), ("b", 2)]
    xm.mark_step()
    assert calls == [("a", 1), ("b", 2)]  # each closure runs once


def test_optimizer_step_matches_optimizer_step_and_barrier_marks_the_step(xm: ModuleType) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    twin = torch.nn.Linear(3, 2)
    twin.load_state_dict(model.state_dict())
    x = torch.randn(4, 3)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (model, twin)]
    for m in (model, twin):
        m(x).sum().backward()
    ran: list[bool] = []
    xm.add_step_closure(lambda: ran.append(True))
    xm.optimizer_step(optimizers[0], barrier=True)
    optimizers[1].step()
    assert ran == [True]
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


Pair = namedtuple("Pair", ["left", "right"])  # module level, so pickle finds it


def test_save_writes_cpu_tensors_that_plain_torch_loads(xm: ModuleType, tmp_path: Path) -> None:
    weights = torch.arange(6.0).reshape(2, 3)
    data: dict[str, Any] = {"weights": weights, "nested": [torch.ones(2), (torch.zeros(1), 3)], "step": 7}
    data["pair"] = Pair(torch.tensor([1, 2]), "x")
    path = tmp_path / "checkpoint.pt"
    xm.save(data, str(path))
    loaded = torch.load(path, weights_only=False)
    assert torch.equal(loaded["weights"], weights) and loaded["weights"].device.type == "cpu"
    assert torch.equal(loaded["nested"][0], torch.ones(2))
    assert torch.equal(loaded["nested"][1][0], torch.zeros(1)) and loaded["nested"][1][1] == 3
    assert loaded["step"] == 7
    assert isinstance(loaded["pair"], Pair)
    assert torch.equal(loaded["pair"].left, torch.tensor([1, 2])) and loaded["pair"].right == "x"


def test_save_of_a_state_dict_loads_with_weights_only(xm: ModuleType, tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    xm.save(model.state_dict(), tmp_path / "sd.pt")
    state = torch.load(tmp_path / "sd.pt")  # weights_only=True, the default
    assert set(state) == {"weight", "bias"}
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_collectives_over_one_replica(xm: ModuleType) -> None:
    t = torch.tensor([1.0, 2.0])
    reduced = xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5)
    assert torch.equal(reduced, torch.tensor([0.5, 1.0])) and torch.equal(t, torch.tensor([1.0, 2.0]))
    copy = xm.all_reduce(xm.REDUCE_MAX, t)
    assert torch.equal(copy, t) and copy is not t
    grads = [torch.tensor([2.0]), torch.tensor([4.0])]
    assert xm.all_reduce(xm.REDUCE_SUM, grads, scale=0.25) is grads
    assert torch.equal(grads[0], torch.tensor([0.5])) and torch.equal(grads[1], torch.tensor([1.0]))
    gathered = xm.all_gather(t)
    assert torch.equal(gathered, t) and gathered is not t
    assert xm.rendezvous("tag", b"payload") == [b"payload"]
    assert xm.mesh_reduce("tag", 3, sum) == 3
    assert xm.do_on_ordinals(lambda a, b: a + b, (1, 2)) == 3
    assert xm.do_on_ordinals(lambda: 1, (), ordinals=(1,)) is None
    with pytest.raises(ValueError, match="reduce_type 'avg'"):
        xm.all_reduce("avg", t)


def test_master_print_prints_on_the_current_stdout(xm: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    finished: list[bool] = []
    xm.master_print("loss", 0.5, finalizer=lambda: finished.append(True))
    assert capsys.readouterr().out == "loss 0.5\n"
    assert finished == [True]


def test_set_rng_state_seeds_the_cpu_generator(xm: ModuleType, torch_xla: ModuleType) -> None:
    xm.set_rng_state(123)
    first = torch.rand(3)
    torch_xla.manual_seed(123)
    assert torch.equal(torch.rand(3), first)


@pytest.mark.parametrize("name", ["all_to_all", "reduce_scatter", "get_memory_info", "get_rng_state"])
def test_documented_functions_not_emulated_fail_when_called(xm: ModuleType, name: str) -> None:
    with pytest.raises(NotEmulatedError) as caught:
        getattr(xm, name)()
    message = str(caught.value)
    assert f"torch_xla.core.xla_model.{name} is not provided by neuron_emu's emulator" in message
    assert "\n" not in message
    assert isinstance(caught.value, NotImplementedError)


@pytest.mark.parametrize(
    ("module", "name"),
    [("torch_xla.core.xla_model", "no_such_function"), ("torch_neuronx", "partition"), ("torch_xla", "launch")],
)
def test_unknown_names_fail_on_access_naming_the_function(module: str, name: str) -> None:
    with shim_imports():
        stand_in = importlib.import_module(module)
        with pytest.raises(AttributeError) as caught:
            getattr(stand_in, name)
    assert f"{module}.{name} is not provided by neuron_emu's emulator" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_top_level_torch_xla_and_runtime(torch_xla: ModuleType) -> None:
    runtime = importlib.import_module("torch_xla.runtime")
    xm = importlib.import_module("torch_xla.core.xla_model")
    assert torch_xla.device() == torch.device("cpu") and torch_xla.devices() == [torch.device("cpu")]
    assert torch_xla.device_count() == 1
    ran: list[int] = []
    xm.add_step_closure(lambda: ran.append(1))
    torch_xla.sync()
    assert ran == [1]
    assert (runtime.world_size(), runtime.global_ordinal(), runtime.local_ordinal()) == (1, 0, 0)
    assert runtime.device_type() == "NEURON"
    with pytest.raises(NotEmulatedError, match=r"torch_xla\.runtime\.use_spmd"):
        runtime.use_spmd()


def test_mp_device_loader_yields_the_batches_and_marks_a_step_per_batch(
    torch_xla: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    pl = importlib.import_module("torch_xla.distributed.parallel_loader")
    xm = importlib.import_module("torch_xla.core.xla_model")
    steps: list[int] = []
    monkeypatch.setattr(xm, "mark_step", lambda: steps.append(1))
    data = torch.utils.data.TensorDataset(torch.arange(10.0).reshape(5, 2), torch.arange(5))
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    device_loader = pl.MpDeviceLoader(loader, xm.xla_device())
    assert len(device_loader) == 3
    batches = list(device_loader)
    expected = list(loader)
    assert len(batches) == 3
    for (x, y), (ex, ey) in zip(batches, expected, strict=True):
        assert torch.equal(x, ex) and torch.equal(y, ey) and x.device.type == "cpu"
    assert len(steps) == 3  # one boundary after each batch's work
    steps.clear()
    per_device = pl.ParallelLoader(loader, [xm.xla_device()], batches_per_execution=2).per_device_loader(0)
    assert next(per_device)[1].tolist() == [0, 1] and next(per_device)[1].tolist() == [2, 3]
    assert steps == []
    assert next(per_device)[1].tolist() == [4]
    assert len(steps) == 1  # after batches 1-2
    with pytest.raises(StopIteration):
        next(per_device)
    assert len(steps) == 2  # after the last batch
    with pytest.raises(StopIteration):
        next(per_device)
    assert len(steps) == 2


def test_torch_neuronx_trace_forwards_to_neuron_emu() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    x = torch.randn(3, 4)
    with shim_imports():
        torch_neuronx = importlib.import_module("torch_neuronx")
        traced = torch_neuronx.trace(model, x, compiler_args="--auto-cast none")
        report = torch_neuronx.analyze(model, x)
    assert isinstance(traced, torch.jit.ScriptModule)
    assert hasattr(traced, "neuron")  # neuron_emu's metadata
    torch.testing.assert_close(traced(x), model(x), rtol=1e-5, atol=1e-5)
    assert report["unsupported_operators"] == []


def test_custom_op_load_and_load_library_are_neuron_emus(tmp_path: Path) -> None:
    # Errors raised before any compiler runs show the calls reach neuron_emu.custom_op (the example test builds
    # and runs a real library through them).
    shape = tmp_path / "shape.cpp"
    shape.write_text('#include "torchneuron/register.h"\nNEURON_LIBRARY(builtin, m) {}\n')
    compute = tmp_path / "relu.cpp"
    compute.write_text("#include <torch/torch.h>\n")
    with shim_imports():
        custom_op = importlib.import_module("torch_neuronx.xla_impl.custom_op")
        with pytest.raises(CustomOpLoadError, match=r"custom-op library .*librelu\.so does not exist"):
            custom_op.load_library(tmp_path / "librelu.so")
        with pytest.raises(CustomOpBuildError, match="reserved"):
            custom_op.load(name="relu", compute_srcs=[compute], shape_srcs=[shape], build_directory=tmp_path)
