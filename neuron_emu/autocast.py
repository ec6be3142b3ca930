"""Emulating `--auto-cast`: which fp32 operations the NeuronCore runs in lower precision, and where it rounds.

- `matmult`: the operands of matrix multiplications (linear, matmul, bmm, conv, einsum, attention) are
  rounded to the auto-cast type; products accumulate in fp32 (PSUM) and results stay fp32.
- `all`: additionally every fp32 tensor an operation produces, every fp32 weight and every fp32 graph input is
  rounded, so all intermediate values are representable in the auto-cast type.
Weights are rounded once, at trace time (like the compiler casting constants), and shared between traces.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

from neuron_emu.compiler_args import CompilerOptions
from neuron_emu.errors import TraceError
from neuron_emu.rounding import round_to

Tensor = torch.Tensor

# Positional operand indices (and keyword names) of the functions the tensor engine runs.
_MATMUL_OPERANDS: dict[Callable[..., Any], tuple[tuple[int, ...], tuple[str, ...]]] = {
    F.linear: ((0, 1), ("input", "weight")),
    F.bilinear: ((0, 1, 2), ("input1", "input2", "weight")),
    torch.matmul: ((0, 1), ("input", "other")),
    Tensor.matmul: ((0, 1), ("other",)),
    Tensor.__matmul__: ((0, 1), ("other",)),
    Tensor.__rmatmul__: ((0, 1), ("other",)),
    torch.mm: ((0, 1), ("input", "mat2")),
    Tensor.mm: ((0, 1), ("mat2",)),
    torch.bmm: ((0, 1), ("input", "mat2")),
    Tensor.bmm: ((0, 1), ("mat2",)),
    torch.mv: ((0, 1), ("input", "vec")),
    Tensor.mv: ((0, 1), ("vec",)),
    torch.dot: ((0, 1), ("input", "tensor")),
    torch.inner: ((0, 1), ("input", "other")),
    torch.tensordot: ((0, 1), ("a", "b")),
    torch.addmm: ((1, 2), ("mat1", "mat2")),
    Tensor.addmm: ((1, 2), ("mat1", "mat2")),
    torch.baddbmm: ((1, 2), ("batch1", "batch2")),
    Tensor.baddbmm: ((1, 2), ("batch1", "batch2")),
    torch.addbmm: ((1, 2), ("batch1", "batch2")),
    torch.addmv: ((1, 2), ("mat", "vec")),
    F.conv1d: ((0, 1), ("input", "weight")),
    F.conv2d: ((0, 1), ("input", "weight")),
    F.conv3d: ((0, 1), ("input", "weight")),
    F.conv_transpose1d: ((0, 1), ("input", "weight")),
    F.conv_transpose2d: ((0, 1), ("input", "weight")),
    F.conv_transpose3d: ((0, 1), ("input", "weight")),
}

# Under `all`, outputs of these are already representable when their inputs are (views, copies, max/min...).
_EXACT_ON_ROUNDED_INPUTS: frozenset[Callable[..., Any]] = frozenset(
    {
        Tensor.view,
        Tensor.reshape,
        torch.reshape,
        Tensor.permute,
        torch.permute,
        Tensor.transpose,
        torch.transpose,
        Tensor.t,
        Tensor.unsqueeze,
        torch.unsqueeze,
        Tensor.squeeze,
        torch.squeeze,
        Tensor.expand,
        Tensor.expand_as,
        Tensor.flatten,
        torch.flatten,
        Tensor.contiguous,
        Tensor.__getitem__,
        Tensor.narrow,
        Tensor.select,
        Tensor.split,
        torch.split,
        Tensor.chunk,
        torch.chunk,
        Tensor.unbind,
        torch.cat,
        torch.stack,
        Tensor.detach,
        Tensor.clone,
        F.relu,
        torch.relu,
        Tensor.relu,
        Tensor.__neg__,
        torch.neg,
        torch.abs,
        Tensor.abs,
        torch.maximum,
        torch.minimum,
        torch.max,
        torch.min,
        torch.amax,
        torch.amin,
    }
)


class _TraceCtx:
    """Stands in for an autograd.Function ctx while tracing inference: saving for backward is a no-op."""

    needs_input_grad: tuple[bool, ...] = ()
    saved_tensors: tuple[Tensor, ...] = ()

    def save_for_backward(self, *tensors: Tensor) -> None:
        self.saved_tensors = tensors

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


@contextlib.contextmanager
def inline_autograd_functions() -> Iterator[None]:
    """While tracing, run `autograd.Function.apply` as its plain `forward`, like Neuron's XLA trace sees it.

    (torch.jit.trace would otherwise record an opaque Python call that cannot be saved.)
    """
    function_cls = torch.autograd.Function
    original = function_cls.__dict__["apply"]

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if not torch.jit.is_tracing():
            return original.__func__(cls, *args, **kwargs)
        if cls.setup_context is not function_cls.setup_context:  # forward without ctx
            return cls.forward(*args, **kwargs)
        return cls.forward(_TraceCtx(), *args, **kwargs)

    function_cls.apply = classmethod(apply)  # type: ignore[assignment,method-assign]
    try:
        yield
    finally:
        function_cls.apply = original  # type: ignore[method-assign]


def _untraced(fn: Callable[[], Tensor]) -> Tensor:
    """Run `fn` with the tracer paused, so its result enters the graph as a constant."""
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)  # type: ignore[attr-defined]
    try:
        return fn()
    finally:
        torch._C._set_tracing_state(state)  # type: ignore[attr-defined]


class AutoCastMode(TorchFunctionMode):
    def __init__(self, options: CompilerOptions, constants: dict[int, Tensor], rounded: dict[int, Tensor]) -> None:
        super().__init__()
        self.options = options
        self.kind = options.auto_cast_type
        self.constants = constants  # id -> weight/buffer tensor of the traced model
        self.rounded = rounded  # id -> rounded copy, shared by every trace of one compile

    def _weight(self, t: Tensor) -> Tensor:
        key = id(t)
        cached = self.rounded.get(key)
        if cached is None:
            cached = _untraced(lambda: round_to(t.detach(), self.kind))
            self.rounded[key] = cached
        return cached

    def _operand(self, value: Any) -> Any:
        if not isinstance(value, Tensor) or value.dtype != torch.float32:
            return value
        if id(value) in self.constants:
            return self._weight(value)
        if self.options.casts_all:
            return value  # already rounded where it was produced
        return round_to(value, self.kind)

    def _constant(self, value: Any) -> Any:
        if isinstance(value, Tensor) and value.dtype == torch.float32 and id(value) in self.constants:
            return self._weight(value)
        return value

    def _output(self, value: Any) -> Any:
        if isinstance(value, Tensor) and value.dtype == torch.float32 and value.is_floating_point():
            return round_to(value, self.kind)
        return value

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func is F.scaled_dot_product_attention:
            return self._attention(*args, **kwargs)
        if self.options.casts_all:
            args, kwargs = tree_map(self._constant, (args, kwargs))
        operands = _MATMUL_OPERANDS.get(func)
        if operands is not None:
            positions, names = operands
            args = tuple(self._operand(a) if i in positions else a for i, a in enumerate(args))
            kwargs = {k: self._operand(v) if k in names else v for k, v in kwargs.items()}
        elif func is torch.einsum and args:
            args = (args[0], *tree_map(self._operand, args[1:]))
        out = func(*args, **kwargs)
        if self.options.casts_all and func not in _EXACT_ON_ROUNDED_INPUTS:
            name = getattr(func, "__name__", "")
            if name.endswith("_") and not name.endswith("__") and isinstance(out, Tensor):
                out.copy_(self._output(out))  # in-place op: round the tensor the caller keeps using
            else:
                out = tree_map(self._output, out)
        return out

    def _attention(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> Tensor:
        """scaled_dot_product_attention as the tensor engine runs it: two matmuls on rounded operands."""
        if dropout_p > 0.0:
            raise TraceError("scaled_dot_product_attention has dropout_p > 0 during trace: call model.eval()")
        length, source = query.size(-2), key.size(-2)
        factor = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
        if enable_gqa:
            repeat = query.size(-3) // key.size(-3)
            key = key.repeat_interleave(repeat, -3)
            value = value.repeat_interleave(repeat, -3)
        scores = torch.matmul(self._operand(query), self._operand(key).transpose(-2, -1)) * factor
        if is_causal:
            causal = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        if self.options.casts_all:
            scores = self._output(scores)
        probs = torch.softmax(scores, dim=-1)
        if self.options.casts_all:
            probs = self._output(probs)
        out = torch.matmul(self._operand(probs), self._operand(value))
        return self._output(out) if self.options.casts_all else out
