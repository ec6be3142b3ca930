"""The ops of a traced TorchScript graph, with the shapes and dtypes the tracer recorded on every value."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import torch

_SCALAR_TYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "Float8_e4m3fn": "float8_e4m3fn",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
}
_ROUNDING_FILE = str(Path(__file__).resolve().parents[1] / "rounding.py")
_INTERNAL_DIRS = (str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parents[1]))


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    dtype: str
    constant: bool

    @property
    def numel(self) -> int:
        return prod(self.shape)


Operand = TensorMeta | tuple[TensorMeta, ...] | None


@dataclass(frozen=True)
class GraphOp:
    kind: str
    inputs: tuple[Operand, ...]
    values: tuple[Any, ...]  # constant non-tensor inputs (None where not constant or a tensor)
    outputs: tuple[TensorMeta | None, ...]
    source: str  # innermost user frame, "file.py(line): function"
    autocast: bool  # a rounding step recorded from neuron_emu/rounding.py
    graph_text: str


def _meta(value: torch._C.Value) -> TensorMeta | None:
    ty = value.type()
    if not isinstance(ty, torch._C.TensorType):
        return None
    sizes = ty.sizes()
    scalar = ty.scalarType()
    if sizes is None or scalar is None:
        return None
    return TensorMeta(
        shape=tuple(int(s) for s in sizes),
        dtype=_SCALAR_TYPES.get(scalar, scalar.lower()),
        constant=value.node().kind() == "prim::Constant",
    )


def _operand(value: torch._C.Value) -> Operand:
    meta = _meta(value)
    if meta is not None:
        return meta
    node = value.node()
    if node.kind() == "prim::ListConstruct":
        members = [_meta(v) for v in node.inputs()]
        if members and all(m is not None for m in members):
            return tuple(m for m in members if m is not None)
    return None


def _constant(value: torch._C.Value) -> Any:
    node = value.node()
    if isinstance(value.type(), torch._C.TensorType):
        return None
    if node.kind() == "prim::Constant":
        return value.toIValue()
    if node.kind() == "prim::ListConstruct":
        items = [_constant(v) for v in node.inputs()]
        return items if all(i is not None for i in items) else None
    return None


def _frames(node: torch._C.Node) -> list[str]:
    try:
        return [line.strip() for line in str(node.sourceRange()).splitlines() if line.strip()]
    except RuntimeError:
        return []


def _user_frame(frames: list[str]) -> str:
    for frame in frames:
        if not frame.startswith(_INTERNAL_DIRS):
            return frame
    return frames[0] if frames else ""


def graph_ops(graph: torch._C.Graph) -> list[GraphOp]:
    """Every non-prim node of `graph` (a traced graph, so values carry complete tensor types)."""
    ops: list[GraphOp] = []
    for node in graph.nodes():
        kind = node.kind()
        if kind.startswith("prim::"):
            continue
        frames = _frames(node)
        inputs = list(node.inputs())
        ops.append(
            GraphOp(
                kind=kind,
                inputs=tuple(_operand(v) for v in inputs),
                values=tuple(_constant(v) for v in inputs),
                outputs=tuple(_meta(v) for v in node.outputs()),
                source=_user_frame(frames),
                autocast=bool(frames) and frames[0].startswith(_ROUNDING_FILE),
                graph_text=str(node).strip(),
            )
        )
    return ops
