"""The shape function is the fake kernel (export, compile, tracing see shapes without running the kernel);
autograd goes through the ops with a torch.autograd.Function, as in the Neuron MLP tutorial."""

from __future__ import annotations

import torch

from neuron_emu.custom_op import LoadedLibrary

ops = torch.ops.nemu_test


class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        out: torch.Tensor = ops.relu_forward(x)
        return out

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        out: torch.Tensor = ops.relu_backward(grad, x)
        return out


class UsesOps(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.tcm_negate(ops.relu_forward(x)) * 2


def calls() -> int:
    return int(ops.kernel_calls(torch.zeros(1)).item())


def test_export_uses_the_shape_function_without_running_the_kernel(test_ops: LoadedLibrary) -> None:
    before = calls()
    exported = torch.export.export(UsesOps(), (torch.randn(6, 4),))
    assert calls() == before
    nodes = {n.target: n for n in exported.graph.nodes if n.op == "call_function"}
    relu = nodes[ops.relu_forward.default]
    assert tuple(relu.meta["val"].shape) == (6, 4)
    assert relu.meta["val"].dtype == torch.float32
    x = torch.randn(6, 4)
    assert torch.equal(exported.module()(x), -torch.relu(x) * 2)
    assert calls() == before + 1


def test_fake_tensor_mode_gets_shapes_from_the_shape_function(test_ops: LoadedLibrary) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = ops.kernel_calls(torch.empty(3, 9))
        assert out.shape == (1,) and out.dtype == torch.int32
        scaled = ops.scale_add(torch.empty(2, 5), torch.empty(2, 5), 1.0, 2, 3.0)
        assert scaled.shape == (2, 5)


def test_torch_compile_fullgraph_runs_through_the_ops(test_ops: LoadedLibrary) -> None:
    compiled = torch.compile(UsesOps(), fullgraph=True, backend="eager")
    x = torch.randn(3, 7)
    assert torch.equal(compiled(x), -torch.relu(x) * 2)


def test_autograd_through_the_custom_ops_matches_torch_relu(test_ops: LoadedLibrary) -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 8, requires_grad=True)
    weights = torch.randn(5, 8)
    (Relu.apply(x) * weights).sum().backward()
    assert x.grad is not None
    custom_grad = x.grad.clone()
    reference = x.detach().clone().requires_grad_(True)
    (torch.relu(reference) * weights).sum().backward()
    assert reference.grad is not None
    assert torch.equal(custom_grad, reference.grad)
    assert not torch.equal(custom_grad, torch.zeros_like(custom_grad))


def test_opcheck_schema_and_fake_tensor(test_ops: LoadedLibrary) -> None:
    x = torch.randn(4, 3)
    torch.library.opcheck(ops.relu_forward.default, (x,), test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(ops.scale_add.default, (x, x, 0.5, 1, 2.0), test_utils=("test_schema", "test_faketensor"))
