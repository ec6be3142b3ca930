"""Loading and running traced artifacts (what the serving container needs): only torch and the stdlib."""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from neuron_emu.custom_op.library import load_library, loaded_libraries
from neuron_emu.errors import ArtifactError, CustomOpLoadError

if TYPE_CHECKING:
    from neuron_emu.cost.plan import CostPlan

FORMAT = "neuron_emu/1"
_BUILTIN_OP_NAMESPACES = frozenset(
    {"aten", "prim", "quantized", "_quantized", "profiler", "_caffe2", "cuda", "_c10d_functional"}
)
_OP_CALL = re.compile(r"\bops\.([A-Za-z_]\w*)\.[A-Za-z_]\w*\(")
_NEURON_EMU_MESSAGE = re.compile(r"(neuron_emu: [^\n]*)")


def custom_namespaces(path: Path) -> set[str]:
    """Op namespaces a saved TorchScript file calls that torch does not define itself."""
    found: set[str] = set()
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if "/code/" in name and name.endswith(".py"):
                    text = archive.read(name).decode("utf-8", errors="replace")
                    found.update(_OP_CALL.findall(text))
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArtifactError(f"{path.name} is not a TorchScript archive: {exc}") from None
    return found - _BUILTIN_OP_NAMESPACES


def load(
    path: str | os.PathLike[str], custom_op_libraries: list[str | os.PathLike[str]] | None = None
) -> torch.jit.ScriptModule:
    """Load a saved traced model with the given custom-op libraries, else the `lib*.so` files beside it."""
    model_path = Path(path)
    if not model_path.is_file():
        raise ArtifactError(f"traced model {model_path} does not exist")
    needed = custom_namespaces(model_path)
    if custom_op_libraries is not None:
        candidates = [Path(p) for p in custom_op_libraries]
    else:
        candidates = sorted(model_path.parent.glob("lib*.so")) if needed else []
    problems: list[str] = []
    for library in candidates:
        try:
            load_library(library)
        except CustomOpLoadError as exc:
            if custom_op_libraries is not None:
                raise
            problems.append(str(exc))
    missing = needed - set(loaded_libraries())
    if missing:
        detail = f" ({problems[0]})" if problems else ""
        raise ArtifactError(
            f"{model_path.name} calls custom ops of {', '.join(sorted(missing))}; load the lib<name>.so that "
            f"defines them first (custom_op_libraries=[...]){detail}"
        )
    try:
        module: torch.jit.ScriptModule = torch.jit.load(str(model_path), map_location="cpu")
    except (RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ArtifactError(f"cannot load {model_path.name}: {first}") from None
    module.eval()
    return module


def _neuron(module: Any) -> Any:
    neuron = getattr(module, "neuron", None)
    if neuron is None or getattr(neuron, "neuron_emu_format", None) != FORMAT:
        raise ArtifactError("not a neuron_emu traced model (made by neuron_emu.trace or trace_buckets)")
    return neuron


def graphs(module: Any) -> list[Any]:
    """The NeuronGraph submodules of a traced model (one, or one per sequence bucket)."""
    neuron = _neuron(module)
    if hasattr(neuron, "buckets"):
        return [graph for _, graph in sorted(neuron.graphs.named_children(), key=lambda item: int(item[0]))]
    return [neuron]


def describe(module: Any) -> dict[str, Any]:
    """What a traced model was compiled for: shapes, buckets, auto-cast, custom ops, dynamic batching."""
    neuron = _neuron(module)
    members = graphs(module)
    first = members[0]
    return {
        "format": FORMAT,
        "buckets": list(neuron.buckets) if hasattr(neuron, "buckets") else [],
        "input_shapes": [list(g.input_shapes) for g in members],
        "input_dtypes": list(first.input_dtype_names),
        "batch_size": int(first.input_shapes[0][0]) if first.input_shapes and first.input_shapes[0] else 1,
        "compiler_args": str(first.compiler_args),
        "auto_cast": str(first.auto_cast),
        "auto_cast_type": str(first.auto_cast_type),
        "custom_op_namespaces": sorted({ns for g in members for ns in g.custom_op_namespaces}),
        "dynamic_batch": all(bool(g.dynamic_batch_enabled) for g in members),
        "batchable": all(bool(g.batchable) for g in members),
    }


def dynamic_batch(module: Any) -> Any:
    """Let a traced model take any dim-0 batch size (split and padded into traced-size chunks); in place."""
    for graph in graphs(module):
        if not graph.batchable:
            raise ArtifactError("dynamic batching needs every input and output to share dim 0 as the batch dimension")
        graph.dynamic_batch_enabled = True
    return module


def cost_plan(module: Any, bucket: int | None = None, prices: Mapping[str, float] | None = None) -> CostPlan:
    """The cost plan recorded at trace time (of `bucket`, a sequence length, when the model has buckets).

    `prices` (instance type -> on-demand USD/hour) fills the plan's $ columns; without it they stay empty.
    """
    from neuron_emu.cost.plan import CostPlan

    neuron = _neuron(module)
    members = graphs(module)
    if hasattr(neuron, "buckets"):
        buckets = list(neuron.buckets)
        if bucket is None:
            raise ArtifactError(f"the model has sequence buckets {buckets}; pass bucket=<length>")
        if bucket not in buckets:
            raise ArtifactError(f"no bucket {bucket} (the model has {buckets})")
        member = members[buckets.index(bucket)]
    else:
        member = members[0]
    return CostPlan.from_dict(json.loads(member.plan_json)).with_prices(prices)


def error_message(exc: BaseException) -> str:
    """One line for an exception raised inside a traced model (TorchScript adds its own traceback)."""
    text = str(exc)
    match = _NEURON_EMU_MESSAGE.search(text)
    if match:
        return match.group(1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
