"""The emulated `xla` device: XLA device arguments mean the CPU inside XlaOnCpu, and nothing changes outside it."""

from __future__ import annotations

import pytest
import torch

from neuron_emu.runner.device import XlaOnCpu, cpu_for_xla, is_xla_device


@pytest.mark.parametrize("value", ["xla", "xla:0", "xla:7", " xla:1 ", torch.device("xla"), torch.device("xla", 3)])
def test_xla_names_are_recognized(value: object) -> None:
    assert is_xla_device(value)


@pytest.mark.parametrize("value", ["cpu", "cuda", "xlax", "xla:", "meta", None, 0, torch.device("cpu")])
def test_other_devices_are_not_xla(value: object) -> None:
    assert not is_xla_device(value)
    assert cpu_for_xla(value) is value


def test_cpu_for_xla_keeps_the_argument_kind() -> None:
    assert cpu_for_xla("xla:1") == "cpu"
    assert cpu_for_xla(torch.device("xla", 1)) == torch.device("cpu")


def test_outside_the_mode_torch_has_no_xla_kernels() -> None:
    # The reason the mode exists: torch accepts the device name but cannot put a tensor there.
    with pytest.raises(RuntimeError):
        torch.zeros(2, device="xla")


@pytest.mark.parametrize("device", ["xla", "xla:0", torch.device("xla"), torch.device("xla", 0)])
def test_common_patterns_give_cpu_tensors_with_unchanged_values(device: str | torch.device) -> None:
    torch.manual_seed(0)
    reference_model = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4)
    expected = reference_model(x)
    with XlaOnCpu():
        model = torch.nn.Linear(4, 3)
        model.load_state_dict(reference_model.state_dict())
        model = model.to(device)
        moved = x.to(device)
        zeros = torch.zeros(2, 3, device=device)
        full = torch.full((2,), 7.0, device=device)
        from_data = torch.tensor([1.0, 2.0], device=device)
        like = torch.ones_like(x, device=device)
        new = x.new_zeros(3, device=device)
        cast = x.to(device, torch.float64)
        keyword = x.to(device=device, dtype=torch.float16)
        constructed = torch.device("xla")
        out = model(moved)
    assert model.weight.device.type == "cpu"
    for tensor in (moved, zeros, full, from_data, like, new, cast, keyword, out):
        assert tensor.device == torch.device("cpu")
    assert constructed == torch.device("cpu")
    assert cast.dtype == torch.float64 and keyword.dtype == torch.float16
    assert torch.equal(out, expected)
    assert torch.equal(zeros, torch.zeros(2, 3)) and torch.equal(full, torch.full((2,), 7.0))


def test_module_to_with_keyword_device_and_to_empty() -> None:
    with XlaOnCpu():
        model = torch.nn.Linear(2, 2).to(device="xla:0", dtype=torch.float64)
        empty = torch.nn.Linear(2, 2, device="meta").to_empty(device="xla")
    assert model.weight.device.type == "cpu" and model.weight.dtype == torch.float64
    assert empty.weight.device.type == "cpu"


def test_other_devices_pass_through_the_mode() -> None:
    with XlaOnCpu():
        meta = torch.zeros(2, device="meta")
        device = torch.device("meta")
    assert meta.device.type == "meta"
    assert device.type == "meta"


def test_the_mode_leaves_the_stack_on_exit_even_on_error() -> None:
    depth = torch._C._len_torch_function_stack()
    with pytest.raises(ValueError), XlaOnCpu():
        raise ValueError("inside")
    assert torch._C._len_torch_function_stack() == depth
    with pytest.raises(RuntimeError):
        torch.ones(1, device="xla")
