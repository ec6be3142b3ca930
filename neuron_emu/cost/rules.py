"""Which NeuronCore engine runs each op, and its FLOPs and bytes (pure functions of the recorded shapes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import prod

from neuron_emu.compiler_args import CompilerOptions
from neuron_emu.cost.graph import GraphOp, Operand, TensorMeta

Engine = str  # "tensor" | "vector" | "scalar" | "gpsimd" | "dma" | "none"

DTYPE_BYTES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
}
CAST_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp8_e4m3": 1}
BUILTIN_NAMESPACES = frozenset({"aten", "prim", "quantized", "_quantized", "profiler", "_caffe2"})

TENSOR_OPS = frozenset(
    {
        "linear",
        "matmul",
        "mm",
        "bmm",
        "mv",
        "dot",
        "inner",
        "addmm",
        "baddbmm",
        "addbmm",
        "addmv",
        "einsum",
        "bilinear",
        "tensordot",
        "_convolution",
        "convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "scaled_dot_product_attention",
    }
)
# The scalar (activation) engine evaluates one transcendental or activation per element per pass.
SCALAR_OPS = frozenset(
    {
        "relu",
        "gelu",
        "tanh",
        "sigmoid",
        "silu",
        "mish",
        "elu",
        "selu",
        "celu",
        "leaky_relu",
        "hardtanh",
        "hardswish",
        "hardsigmoid",
        "softplus",
        "log_sigmoid",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "erf",
        "erfc",
        "sin",
        "cos",
        "tan",
        "atan",
        "softsign",
    }
)
# Vector-engine ops and their FLOPs per output element (reductions count input elements).
VECTOR_FACTORS = {
    "softmax": 5.0,
    "_softmax": 5.0,
    "log_softmax": 5.0,
    "_log_softmax": 5.0,
    "layer_norm": 8.0,
    "native_layer_norm": 8.0,
    "group_norm": 8.0,
    "rms_norm": 5.0,
    "batch_norm": 2.0,
    "_native_batch_norm_legit_no_training": 2.0,
    "instance_norm": 8.0,
}
REDUCTIONS = frozenset(
    {
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "var",
        "std",
        "norm",
        "logsumexp",
        "all",
        "any",
    }
)
GPSIMD_OPS = frozenset(
    {
        "embedding",
        "embedding_bag",
        "index_select",
        "gather",
        "take",
        "take_along_dim",
        "index",
        "index_put",
        "index_put_",
        "scatter",
        "scatter_",
        "scatter_add",
        "scatter_add_",
        "scatter_reduce",
        "cumsum",
        "cumprod",
        "topk",
    }
)
GATHERS = frozenset({"embedding", "embedding_bag", "index_select", "gather", "take", "take_along_dim", "index"})
DMA_OPS = frozenset(
    {
        "cat",
        "stack",
        "hstack",
        "vstack",
        "constant_pad_nd",
        "pad",
        "reflection_pad1d",
        "reflection_pad2d",
        "replication_pad1d",
        "replication_pad2d",
        "repeat",
        "repeat_interleave",
        "tile",
        "contiguous",
        "clone",
        "copy_",
        "flip",
        "roll",
    }
)
FREE_OPS = frozenset(
    {
        "view",
        "reshape",
        "_reshape_alias",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "squeeze_",
        "unsqueeze_",
        "permute",
        "transpose",
        "t",
        "expand",
        "expand_as",
        "slice",
        "select",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "detach",
        "alias",
        "size",
        "dim",
        "numel",
        "Int",
        "Float",
        "Bool",
        "ScalarImplicit",
        "dropout",
        "feature_dropout",
        "alpha_dropout",
        "lift_fresh",
        "lift_fresh_copy",
        "view_as",
        "reshape_as",
        "movedim",
        "__getitem__",
        "len",
        "list",
        "format",
        "warn",
        "device",
        "zeros",
        "ones",
        "full",
        "empty",
        "arange",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "scalar_tensor",
        "tensor",
        "numpy_T",
        "mT",
    }
)
# Ops NeuronCores cannot run: data-dependent output shapes, randomness at inference, no NeuronCore lowering.
UNSUPPORTED = {
    "nonzero": "its output shape depends on the data (Neuron graphs have fixed shapes)",
    "nonzero_static": "its output shape depends on the data (Neuron graphs have fixed shapes)",
    "unique": "its output shape depends on the data",
    "_unique": "its output shape depends on the data",
    "_unique2": "its output shape depends on the data",
    "unique_dim": "its output shape depends on the data",
    "unique_consecutive": "its output shape depends on the data",
    "masked_select": "its output shape depends on the data",
    "item": "it reads a tensor value back to the host during the graph",
    "_local_scalar_dense": "it reads a tensor value back to the host during the graph",
    "sort": "neuronx-cc has no lowering for sort",
    "argsort": "neuronx-cc has no lowering for sort",
    "multinomial": "random sampling is not compiled into inference graphs",
    "bernoulli": "random sampling is not compiled into inference graphs",
    "rand": "random sampling is not compiled into inference graphs",
    "randn": "random sampling is not compiled into inference graphs",
    "randint": "random sampling is not compiled into inference graphs",
    "randperm": "random sampling is not compiled into inference graphs",
    "normal": "random sampling is not compiled into inference graphs",
    "view_as_complex": "NeuronCores have no complex dtypes",
    "view_as_real": "NeuronCores have no complex dtypes",
    "complex": "NeuronCores have no complex dtypes",
    "polar": "NeuronCores have no complex dtypes",
    "inverse": "no NeuronCore lowering for matrix decompositions",
    "det": "no NeuronCore lowering for matrix decompositions",
    "svd": "no NeuronCore lowering for matrix decompositions",
    "qr": "no NeuronCore lowering for matrix decompositions",
    "cholesky": "no NeuronCore lowering for matrix decompositions",
}
_UNSUPPORTED_PREFIXES = {
    "fft_": "no NeuronCore lowering for FFTs",
    "linalg_": "no NeuronCore lowering for linear algebra",
}


@dataclass(frozen=True)
class Classified:
    engine: Engine
    unsupported: str | None = None
    note: str = ""
    gpsimd_cores: int = 8


def split_kind(kind: str) -> tuple[str, str]:
    namespace, _, name = kind.partition("::")
    return namespace, name.split(".")[0]


def _tensors(operands: tuple[Operand, ...]) -> list[TensorMeta]:
    out: list[TensorMeta] = []
    for operand in operands:
        if isinstance(operand, TensorMeta):
            out.append(operand)
        elif isinstance(operand, tuple):
            out.extend(operand)
    return out


def classify(op: GraphOp, custom_namespaces: Mapping[str, bool]) -> Classified:
    namespace, name = split_kind(op.kind)
    if op.autocast:
        return Classified("none", note="auto-cast rounding (done by the engines' datapath)")
    if namespace not in BUILTIN_NAMESPACES:
        if namespace in custom_namespaces:
            cores = 8 if custom_namespaces[namespace] else 1
            return Classified("gpsimd", note=f"custom C++ op on {cores} GPSIMD core(s)", gpsimd_cores=cores)
        return Classified("none", unsupported=f"'{namespace}' is not a Neuron custom-op library built by neuron_emu")
    if name in UNSUPPORTED:
        return Classified("none", unsupported=UNSUPPORTED[name])
    for prefix, reason in _UNSUPPORTED_PREFIXES.items():
        if name.startswith(prefix):
            return Classified("none", unsupported=reason)
    wide = [o.dtype for o in op.outputs if o and o.dtype in ("float64", "complex64", "complex128")]
    if wide and name not in FREE_OPS:
        return Classified("none", unsupported=f"NeuronCores do not compute in {wide[0]}")
    base = name.rstrip("_") if name.endswith("_") and not name.endswith("__") else name
    if name in TENSOR_OPS:
        return Classified("tensor")
    if name in FREE_OPS:
        return Classified("none", note="layout only (folded into access patterns)")
    if base in SCALAR_OPS:
        return Classified("scalar")
    if name in GPSIMD_OPS or base in GPSIMD_OPS:
        return Classified("gpsimd")
    if name in DMA_OPS:
        return Classified("dma")
    if name in ("to", "_to_copy", "type_as"):
        ins = _tensors(op.inputs)
        outs = [o for o in op.outputs if o]
        if ins and outs and ins[0].dtype == outs[0].dtype:
            return Classified("none", note="no-op conversion")
        return Classified("vector", note="dtype conversion")
    if name in VECTOR_FACTORS or name in REDUCTIONS:
        return Classified("vector")
    known_elementwise = {
        "add", "sub", "mul", "div", "rsub", "neg", "abs", "pow", "maximum", "minimum", "clamp", "clamp_min",
        "clamp_max", "where", "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
        "logical_not", "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "floor", "ceil", "round",
        "sign", "square", "fill", "tril", "triu", "fmod", "remainder", "floor_divide", "__and__", "__or__",
        "__rshift__", "__lshift__", "isfinite", "isnan", "isinf", "addcmul", "addcdiv", "lerp",
    }  # fmt: skip
    if base in known_elementwise:
        return Classified("vector")
    return Classified("vector", note="no specific rule: estimated as an element-wise op")


def _equation_flops(equation: str, operands: list[TensorMeta], output: TensorMeta | None) -> float:
    lhs, _, _ = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if "..." in equation or len(terms) != len(operands):
        k = operands[0].shape[-1] if operands and operands[0].shape else 1
        return 2.0 * (output.numel if output else 1) * k
    sizes: dict[str, int] = {}
    for term, meta in zip(terms, operands, strict=True):
        for letter, size in zip(term, meta.shape, strict=False):
            sizes[letter] = size
    return 2.0 * prod(sizes.values())


@dataclass(frozen=True)
class Work:
    """One row of work on one engine: FLOPs (or GPSIMD element-ops) and the tensors it touches."""

    engine: Engine
    flops: float
    label: str = ""


def work(op: GraphOp, engine: Engine) -> list[Work]:
    """The FLOPs of `op` on `engine` (an op may split across engines, e.g. attention)."""
    _, name = split_kind(op.kind)
    base = name.rstrip("_") if name.endswith("_") and not name.endswith("__") else name
    outs = [o for o in op.outputs if o]
    out_numel = float(sum(o.numel for o in outs))
    ins = _tensors(op.inputs)
    if engine == "tensor":
        first = op.inputs[0] if op.inputs else None
        if name == "linear" and len(ins) >= 2:
            k = ins[1].shape[-1] if ins[1].shape else 1
            bias = out_numel if len(ins) >= 3 else 0.0
            return [Work("tensor", 2.0 * out_numel * k + bias)]
        if name in ("addmm", "baddbmm", "addbmm", "addmv") and len(ins) >= 3:
            k = ins[1].shape[-1] if ins[1].shape else 1
            return [Work("tensor", 2.0 * out_numel * k + out_numel)]
        if name in ("_convolution", "convolution", "conv1d", "conv2d", "conv3d") and len(ins) >= 2:
            weight = ins[1]
            per_output = weight.numel / weight.shape[0] if weight.shape and weight.shape[0] else 1
            bias = out_numel if len(ins) >= 3 else 0.0
            return [Work("tensor", 2.0 * out_numel * per_output + bias)]
        if name.startswith("conv_transpose") and len(ins) >= 2:
            weight = ins[1]
            per_input = weight.numel / weight.shape[0] if weight.shape and weight.shape[0] else 1
            return [Work("tensor", 2.0 * ins[0].numel * per_input)]
        if name == "einsum" and isinstance(op.values[0] if op.values else None, str):
            return [Work("tensor", _equation_flops(str(op.values[0]), ins, outs[0] if outs else None))]
        if name == "bilinear" and len(ins) >= 3:
            weight = ins[2]
            return [Work("tensor", 2.0 * out_numel * weight.shape[1] * weight.shape[2])]
        if name == "scaled_dot_product_attention" and len(ins) >= 3:
            query, key, value = ins[0], ins[1], ins[2]
            length, depth = query.shape[-2], query.shape[-1]
            source, value_depth = key.shape[-2], value.shape[-1]
            batch = query.numel / max(1, length * depth)
            scores = batch * length * source
            return [
                Work("tensor", 2.0 * scores * (depth + value_depth), "QK^T and PV matmuls"),
                Work("vector", 5.0 * scores, "softmax"),
            ]
        if isinstance(first, TensorMeta) and first.shape:
            return [Work("tensor", 2.0 * out_numel * first.shape[-1])]
        return [Work("tensor", 2.0 * out_numel)]
    if engine == "vector":
        if name in REDUCTIONS:
            return [Work("vector", float(ins[0].numel) if ins else out_numel)]
        return [Work("vector", VECTOR_FACTORS.get(name, 1.0) * out_numel)]
    if engine == "scalar":
        return [Work("scalar", out_numel)]
    if engine == "gpsimd":
        if base in GATHERS:
            return [Work("gpsimd", 0.0)]
        return [Work("gpsimd", float(sum(t.numel for t in ins)) + out_numel)]
    return [Work(engine, 0.0)]


def stored_bytes(meta: TensorMeta, engine: Engine, options: CompilerOptions) -> int:
    """Bytes of `meta` as stored on the NeuronCore (auto-cast shrinks fp32 weights; `all`, activations)."""
    size = DTYPE_BYTES.get(meta.dtype, 4)
    if meta.dtype == "float32" and (
        options.casts_all or (options.casts_matmul and engine == "tensor" and meta.constant)
    ):
        size = CAST_BYTES[options.auto_cast_type]
    return meta.numel * size


def tensor_engine_dtype(op: GraphOp, options: CompilerOptions) -> str:
    ins = _tensors(op.inputs)
    dtype = ins[0].dtype if ins else "float32"
    if dtype == "float32":
        return options.auto_cast_type if options.casts_matmul else "fp32"
    return {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8_e4m3"}.get(dtype, "fp32")


def traffic(op: GraphOp, engine: Engine, options: CompilerOptions) -> tuple[float, float]:
    """(weight bytes read from HBM, activation bytes read and written) of one op."""
    _, name = split_kind(op.kind)
    base = name.rstrip("_") if name.endswith("_") and not name.endswith("__") else name
    outs = [o for o in op.outputs if o]
    ins = _tensors(op.inputs)
    out_bytes = float(sum(stored_bytes(o, engine, options) for o in outs))
    if base in GATHERS:  # only the gathered rows of a table leave HBM
        indices = float(sum(stored_bytes(t, engine, options) for t in ins if not t.constant))
        return out_bytes, indices + out_bytes
    weights = float(sum(stored_bytes(t, engine, options) for t in ins if t.constant))
    activations = float(sum(stored_bytes(t, engine, options) for t in ins if not t.constant)) + out_bytes
    return weights, activations
