"""The TorchScript modules of a traced artifact (saved with torch.jit.save, loaded with torch.jit.load).

- `NeuronGraph`: one compiled graph with fixed input shapes and dtypes (like a NEFF), its metadata and cost
  plan, and optional dynamic batching (split/pad dim 0 into chunks of the traced batch size).
- `NeuronBuckets`: several graphs of one model traced at different sequence lengths; pads inputs to the
  smallest bucket that fits and trims the outputs back.
Both take and return a list of tensors; the traced entry module turns that into the model's own signature.
"""

# No `from __future__ import annotations`: TorchScript reads these annotations at runtime.
import torch
from torch import Tensor

FORMAT = "neuron_emu/1"


def _dtype_name(dtype: torch.dtype) -> str:
    names = {
        torch.float32: "torch.float32",
        torch.float64: "torch.float64",
        torch.float16: "torch.float16",
        torch.bfloat16: "torch.bfloat16",
        torch.int64: "torch.int64",
        torch.int32: "torch.int32",
        torch.int16: "torch.int16",
        torch.int8: "torch.int8",
        torch.uint8: "torch.uint8",
        torch.bool: "torch.bool",
    }
    if dtype in names:
        return names[dtype]
    return "dtype " + str(dtype)


class NeuronGraph(torch.nn.Module):
    neuron_emu_format: str
    compiler_args: str
    auto_cast: str
    auto_cast_type: str
    plan_json: str
    custom_op_namespaces: list[str]
    input_shapes: list[list[int]]
    input_dtype_names: list[str]
    output_count: int
    batchable: bool
    dynamic_batch_enabled: bool
    output_shapes: list[list[int]]
    dry_run: bool

    def __init__(
        self,
        graph: torch.jit.ScriptModule,
        example_inputs: list[Tensor],
        example_outputs: list[Tensor],
        batchable: bool,
        compiler_args: str,
        auto_cast: str,
        auto_cast_type: str,
        plan_json: str,
        custom_op_namespaces: list[str],
    ) -> None:
        super().__init__()
        self.compiled = graph
        self.neuron_emu_format = FORMAT
        self.compiler_args = compiler_args
        self.auto_cast = auto_cast
        self.auto_cast_type = auto_cast_type
        self.plan_json = plan_json
        self.custom_op_namespaces = custom_op_namespaces
        self.input_shapes = [list(x.shape) for x in example_inputs]
        self.input_dtype_names = [str(x.dtype) for x in example_inputs]
        self.input_templates = [torch.empty(0, dtype=x.dtype) for x in example_inputs]
        self.output_count = len(example_outputs)
        self.output_shapes = [list(o.shape) for o in example_outputs]
        self.output_templates = [torch.empty(0, dtype=o.dtype) for o in example_outputs]
        self.batchable = batchable
        self.dynamic_batch_enabled = False
        self.dry_run = False  # set while the entry module is traced: outputs of the right shape, no compute

    def _check_inputs(self, inputs: list[Tensor]) -> None:
        if len(inputs) != len(self.input_shapes):
            raise ValueError(
                f"neuron_emu: the model was traced with {len(self.input_shapes)} inputs, got {len(inputs)}"
            )
        for i in range(len(inputs)):
            if inputs[i].dtype != self.input_templates[i].dtype:
                got = _dtype_name(inputs[i].dtype)
                traced = self.input_dtype_names[i]
                raise ValueError(
                    f"neuron_emu: input {i} has dtype {got} but the model was traced with {traced} (dtypes are fixed)"
                )

    def forward(self, inputs: list[Tensor]) -> list[Tensor]:
        self._check_inputs(inputs)
        if self.dry_run:
            return [
                torch.zeros(self.output_shapes[k], dtype=self.output_templates[k].dtype)
                for k in range(self.output_count)
            ]
        if not self.dynamic_batch_enabled:
            for i in range(len(inputs)):
                shape = list(inputs[i].shape)
                traced = self.input_shapes[i]
                if shape != traced:
                    raise ValueError(
                        f"neuron_emu: input {i} has shape {shape} but the model was traced for {traced} "
                        "(shapes are fixed; see neuron_emu.dynamic_batch and sequence buckets)"
                    )
            return self.compiled(inputs)
        return self._dynamic_batch(inputs)

    def _dynamic_batch(self, inputs: list[Tensor]) -> list[Tensor]:
        n = inputs[0].size(0) if inputs[0].dim() > 0 else 0
        for i in range(len(inputs)):
            shape = list(inputs[i].shape)
            if len(shape) == 0 or shape[0] != n:
                raise ValueError("neuron_emu: dynamic batching needs the same dim-0 batch size for every input")
            if shape[1:] != self.input_shapes[i][1:]:
                traced = self.input_shapes[i]
                raise ValueError(
                    f"neuron_emu: input {i} has shape {shape}; "
                    f"dynamic batching only varies dim 0 of the traced {traced}"
                )
        if n == 0:
            raise ValueError("neuron_emu: an empty batch")
        batch = self.input_shapes[0][0]
        pieces: list[list[Tensor]] = []
        start = 0
        while start < n:
            stop = min(start + batch, n)
            real = stop - start
            chunk: list[Tensor] = []
            for x in inputs:
                part = x[start:stop]
                if real < batch:
                    pad_shape = [batch - real] + list(part.shape[1:])  # noqa: RUF005 (TorchScript has no list unpacking)
                    part = torch.cat([part, torch.zeros(pad_shape, dtype=part.dtype)], 0)
                chunk.append(part)
            outs = self.compiled(chunk)
            pieces.append([o[:real] for o in outs])
            start = stop
        if len(pieces) == 1:
            return pieces[0]
        return [torch.cat([p[j] for p in pieces], 0) for j in range(self.output_count)]


class NeuronBuckets(torch.nn.Module):
    neuron_emu_format: str
    buckets: list[int]
    seq_dims: list[int]
    pad_values: list[int]
    output_seq_dims: list[int]

    def __init__(
        self,
        graphs: list[torch.jit.ScriptModule],
        buckets: list[int],
        seq_dims: list[int],
        pad_values: list[int],
        output_seq_dims: list[int],
    ) -> None:
        super().__init__()
        self.graphs = torch.nn.ModuleList(graphs)
        self.neuron_emu_format = FORMAT
        self.buckets = buckets
        self.seq_dims = seq_dims
        self.pad_values = pad_values
        self.output_seq_dims = output_seq_dims

    def forward(self, inputs: list[Tensor]) -> list[Tensor]:
        if len(inputs) != len(self.seq_dims):
            raise ValueError(f"neuron_emu: the model was traced with {len(self.seq_dims)} inputs, got {len(inputs)}")
        length = -1
        for i in range(len(inputs)):
            d = self.seq_dims[i]
            if d >= 0:
                if inputs[i].dim() <= d:
                    raise ValueError(f"neuron_emu: input {i} has no sequence dimension {d}")
                size = inputs[i].size(d)
                if length == -1:
                    length = size
                elif size != length:
                    raise ValueError(f"neuron_emu: sequence inputs have different lengths ({length} and {size})")
        index = -1
        for j in range(len(self.buckets)):
            if index == -1 and self.buckets[j] >= length:
                index = j
        if index == -1:
            raise ValueError(f"neuron_emu: sequence length {length} exceeds the largest bucket {self.buckets[-1]}")
        target = self.buckets[index]
        padded: list[Tensor] = []
        for i in range(len(inputs)):
            x = inputs[i]
            d = self.seq_dims[i]
            if d >= 0 and x.size(d) < target:
                pad_shape = list(x.shape)
                pad_shape[d] = target - x.size(d)
                x = torch.cat([x, torch.full(pad_shape, self.pad_values[i], dtype=x.dtype)], d)
            padded.append(x)
        outs: list[Tensor] = []
        for j, graph in enumerate(self.graphs):
            if j == index:
                outs = graph(padded)
        result: list[Tensor] = []
        for k in range(len(outs)):
            out = outs[k]
            d = self.output_seq_dims[k] if k < len(self.output_seq_dims) else -1
            if d >= 0 and out.size(d) != length:
                out = out.narrow(d, 0, length)
            result.append(out)
        return result


class Entry(torch.nn.Module):
    """Traced (not scripted), so the saved module keeps the model's positional signature and outputs."""

    def __init__(self, neuron: torch.jit.ScriptModule, output_kind: str) -> None:
        super().__init__()
        self.neuron = neuron
        object.__setattr__(self, "_output_kind", output_kind)

    def forward(self, *args: Tensor) -> Tensor | tuple[Tensor, ...]:
        outs = self.neuron(list(args))
        if self._output_kind == "tensor":
            return outs[0]
        return tuple(outs)
