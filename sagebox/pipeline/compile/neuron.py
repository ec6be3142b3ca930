"""Compile a Hugging Face model folder (any task) for NeuronCores into a servable model directory, by one of two
backends.

- `neuron_emu` (default; `sagebox build` uses it): Sagebox's emulator, anywhere. The graphs are TorchScript that
  runs on the host CPU with Neuron auto-cast numerics, plus a cost plan per bucket (estimates).
- `torch_neuronx`: AWS's compiler (`torch_neuronx.trace`, neuronx-cc), where torch-neuronx is installed: an
  inf2/trn1 instance or the AWS Neuron PyTorch inference container. The graphs run on NeuronCores only.

Both trace the same sequence buckets with the same example inputs, batch size and auto-cast compiler arguments,
and enable dynamic batching; the manifest's `compile.backend` records which one ran.

With `tensor_parallel` N > 1 (neuron_emu only) every bucket is sharded over N emulated NeuronCores by
`neuron_emu.parallel.trace` and saved as its own directory (`tp/seq<L>/`); the tensor-parallel plans (estimates,
per instance type: the degrees that fit, the fastest one, the collective time) are written next to where the
single-core cost plan would be (PARALLEL_PLAN_FILE, and a text rendering beside it).
"""

from __future__ import annotations

import importlib
import json
import shlex
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from container.manifest import CompileSpec, Manifest
from infra.catalog import load_prices
from sagebox.errors import SageboxError
from sagebox.pipeline.export.artifact import staged_dir, write_manifest
from sagebox.pipeline.export.servable import ModelSource, buckets_for, source_spec, task_manifest_fields
from sagebox.pipeline.load.hf_model import SEQUENCE_OUTPUT_DIMS, TaskModule, load_task_module
from sagebox.pipeline.load.hf_task import TaskInfo, detect_task, tokenizer_file

Backend = Literal["neuron_emu", "torch_neuronx"]
BACKENDS: tuple[Backend, ...] = ("neuron_emu", "torch_neuronx")
# Each bucket is a graph compiled for, and held in, NeuronCore memory: fewer and coarser than on CPU.
NEURON_BUCKETS = (64, 128, 256, 384)
# Where torch-neuronx is installed: AWS's PyTorch inference Neuron Deep Learning Container (the tag format and
# the current tags: "Available Deep Learning Containers Images", aws.github.io/deep-learning-containers, and
# github.com/aws-neuron/deep-learning-containers). container/Dockerfile.neuron builds FROM the same image (a test
# keeps the two equal).
NEURON_DLC = "public.ecr.aws/neuron/pytorch-inference-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"
PARALLEL_PLAN_FILE = "neuron_parallel_plan.json"
PARALLEL_PLAN_TEXT = "neuron_parallel_plan.txt"
NEURONX_TENSOR_PARALLEL = (
    "--tensor-parallel above 1 is not supported with --backend torch-neuronx here: Sagebox shards models over "
    "NeuronCores only with its emulator (neuron_emu.parallel); compile with --backend neuron-emu, or with "
    "--tensor-parallel 1"
)
NEURONX_MISSING = (
    "torch-neuronx is not installed here: run `sagebox compile --backend torch-neuronx` on an inf2/trn1 instance "
    f"or inside the AWS Neuron PyTorch DLC ({NEURON_DLC})"
)


@dataclass(frozen=True)
class NeuronxArtifact:
    """What `trace_neuronx` wrote: one TorchScript file per bucket, and how it was compiled."""

    files: tuple[str, ...]
    buckets: tuple[int, ...]
    compile_spec: CompileSpec

    @property
    def model_file(self) -> str:
        return self.files[0]


def import_torch_neuronx() -> Any:
    """AWS's torch_neuronx, imported only when asked for; one SageboxError line where it is not installed."""
    try:
        return importlib.import_module("torch_neuronx")
    except ImportError:
        raise SageboxError(NEURONX_MISSING) from None


def example_inputs(batch_size: int, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask (all ones: the traced graph then gives the eager result on padded inputs),
    token_type_ids; the same examples neuron_emu.compile_qa traces with."""
    ones = torch.ones(batch_size, length, dtype=torch.long)
    return ones, ones.clone(), torch.zeros(batch_size, length, dtype=torch.long)


def trace_neuronx(
    module: torch.nn.Module,
    buckets: Sequence[int],
    batch_size: int,
    compiler_args: str | None,
    out_dir: Path,
    neuronx: Any,
) -> NeuronxArtifact:
    """`neuronx.trace` every bucket with neuronx-cc arguments, `neuronx.dynamic_batch` it, save one file per bucket.

    compiler_args None means neuron_emu's default QA arguments (auto-cast matmult to bf16), so both backends
    compile with the same numerics. The arguments reach neuronx-cc as given (split like a shell); neuron_emu's
    parser only reads what the manifest records (auto-cast, target) and stays quiet about flags it does not emulate.
    """
    from container.handlers.neuron import neuronx_bucket_file
    from neuron_emu.compiler_args import parse_compiler_args
    from neuron_emu.errors import NeuronEmuError, NeuronEmuWarning
    from neuron_emu.hardware import target_instances
    from neuron_emu.qa import DEFAULT_QA_COMPILER_ARGS

    text = DEFAULT_QA_COMPILER_ARGS if compiler_args is None else compiler_args
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NeuronEmuWarning)
            options = parse_compiler_args(text)
    except NeuronEmuError as exc:
        raise SageboxError(f"--compiler-args: {exc}") from None
    args = shlex.split(text)
    module = module.eval()
    lengths = list(buckets)
    with torch.inference_mode():
        outputs = module(*example_inputs(batch_size, lengths[0]))
    tensors = outputs if isinstance(outputs, tuple) else (outputs,)
    if not tensors or not all(isinstance(o, torch.Tensor) and o.shape[:1] == (batch_size,) for o in tensors):
        raise SageboxError("the model must return a tensor or a tuple of tensors, batch first")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    for length in lengths:
        try:
            traced = neuronx.trace(module, example_inputs(batch_size, length), compiler_args=list(args))
            traced = neuronx.dynamic_batch(traced)
        except Exception as exc:  # neuronx-cc's failures share no exception type: report the last line
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = lines[-1] if lines else type(exc).__name__
            raise SageboxError(f"torch-neuronx compilation of sequence bucket {length} failed: {reason}") from None
        name = neuronx_bucket_file(length)
        torch.jit.save(traced, str(out / name))
        files.append(name)
    spec = CompileSpec(
        backend="torch_neuronx",
        compiler=f"torch-neuronx {getattr(neuronx, '__version__', 'unknown version')} (neuronx-cc)",
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        target_instances=list(target_instances(options.target)),
    )
    return NeuronxArtifact(files=tuple(files), buckets=tuple(lengths), compile_spec=spec)


def build_neuron(
    model_dir: Path,
    out_dir: Path,
    *,
    batch_size: int = 1,
    compiler_args: str | None = None,
    module: TaskModule | None = None,
    backend: Backend = "neuron_emu",
    tensor_parallel: int = 1,
    info: TaskInfo | None = None,
    source: ModelSource | None = None,
) -> Manifest:
    """Trace one graph per sequence bucket (sharded over `tensor_parallel` emulated NeuronCores when above 1); write
    the graph(s), the emulator's cost plan(s), and the manifest."""
    if backend not in BACKENDS:
        raise SageboxError(f"backend {backend!r} is not one of: {', '.join(BACKENDS)}")
    if isinstance(tensor_parallel, bool) or not isinstance(tensor_parallel, int) or tensor_parallel < 1:
        raise SageboxError(f"--tensor-parallel must be a positive integer, got {tensor_parallel!r}")
    if tensor_parallel > 1 and backend == "torch_neuronx":
        raise SageboxError(NEURONX_TENSOR_PARALLEL)
    # Before reading the model: on a host without torch-neuronx the answer is the same whatever the model.
    neuronx = import_torch_neuronx() if backend == "torch_neuronx" else None
    info = info or detect_task(model_dir)
    config = info.config
    module = module or load_task_module(info)
    buckets, max_length = buckets_for(info, NEURON_BUCKETS)
    with staged_dir(out_dir) as staging:
        if neuronx is not None:
            artifact = trace_neuronx(module, buckets, batch_size, compiler_args, staging, neuronx)
            model_file, spec = artifact.model_file, artifact.compile_spec
        elif tensor_parallel > 1:
            model_file, spec = compile_parallel(module, buckets, batch_size, compiler_args, staging, tensor_parallel)
        else:
            model_file, spec = _compile_emulated(module, buckets, batch_size, compiler_args, staging, info.task)
        heads = attention_heads(config)
        if spec.num_attention_heads is None and heads is not None:
            spec = spec.model_copy(update={"num_attention_heads": heads})
        shutil.copyfile(tokenizer_file(model_dir, info.model_dir), staging / "tokenizer.json")
        manifest = write_manifest(
            staging,
            variant="neuron",
            runtime="neuron",
            model_file=model_file,
            buckets=buckets,
            max_length=max_length,
            source=source_spec(info, source or ModelSource(model_dir)),
            compile_spec=spec,
            **task_manifest_fields(info),
        )
    return manifest


def _compile_emulated(
    module: TaskModule, buckets: list[int], batch_size: int, compiler_args: str | None, staging: Path, task: str
) -> tuple[str, CompileSpec]:
    from neuron_emu import compile_model
    from neuron_emu.errors import NeuronEmuError

    try:
        # The plans price each instance type with the catalog's on-demand prices (neuron_emu holds none).
        artifact = compile_model(
            module,
            buckets,
            batch_size,
            compiler_args,
            staging,
            prices=load_prices().per_hour,
            output_seq_dims=list(SEQUENCE_OUTPUT_DIMS[task]),
        )
    except NeuronEmuError as exc:
        raise SageboxError(f"Neuron compilation failed: {exc}") from None
    return artifact.model_file, CompileSpec(**artifact.compile_info().to_dict())


def attention_heads(config: dict[str, object]) -> int | None:
    """The model's attention heads from its config.json (DistilBERT spells it n_heads); None if it records none."""
    value = config.get("num_attention_heads", config.get("n_heads"))
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def compile_parallel(
    module: TaskModule, buckets: list[int], batch_size: int, compiler_args: str | None, staging: Path, degree: int
) -> tuple[str, CompileSpec]:
    """Shard every bucket over `degree` emulated NeuronCores (neuron_emu.parallel.trace, the buckets, example inputs
    and compiler arguments of the single-core path), enable dynamic batching, save each bucket to `tp/seq<L>/`, and
    write the buckets' tensor-parallel plans (estimates) to PARALLEL_PLAN_FILE / PARALLEL_PLAN_TEXT."""
    from container.handlers.neuron import parallel_bucket_dir, parallel_model_file
    from neuron_emu import __version__ as emu_version
    from neuron_emu import parallel
    from neuron_emu.compiler_args import parse_compiler_args
    from neuron_emu.errors import NeuronEmuError
    from neuron_emu.hardware import target_instances
    from neuron_emu.qa import DEFAULT_QA_COMPILER_ARGS

    args = DEFAULT_QA_COMPILER_ARGS if compiler_args is None else compiler_args
    plans: dict[str, dict[str, object]] = {}
    texts: list[str] = []
    heads: int | None = None
    try:
        options = parse_compiler_args(args)
        for length in buckets:
            inputs = example_inputs(batch_size, length)
            model = parallel.trace(module.eval(), inputs, tp_degree=degree, compiler_args=args)
            try:
                model.dynamic_batch()
                model.save(staging / parallel_bucket_dir(length))
            finally:
                model.close()  # never started here (no call ran), so no worker to stop
            plans[str(length)] = model.plan.to_dict()
            texts.append(f"== sequence bucket {length} ==\n{model.plan.to_text()}")
            heads = int(model.manifest.model["heads"])
    except NeuronEmuError as exc:
        raise SageboxError(f"Neuron compilation with --tensor-parallel {degree} failed: {exc}") from None
    document = {
        "estimate": True,
        "tensor_parallel": degree,
        "compiler_args": options.text(),
        "batch_size": batch_size,
        "buckets": plans,
    }
    (staging / PARALLEL_PLAN_FILE).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    (staging / PARALLEL_PLAN_TEXT).write_text("\n".join(texts))
    spec = CompileSpec(
        backend="neuron_emu",
        compiler=f"neuron_emu {emu_version} (emulating neuronx-cc, tensor parallel over {degree} NeuronCores)",
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        target_instances=list(target_instances(options.target)),
        tensor_parallel=degree,
        num_attention_heads=heads,
    )
    return parallel_model_file(buckets[0]), spec


def read_parallel_plans(model_dir: Path) -> dict[int, Any]:
    """The per-bucket tensor-parallel plans (neuron_emu.parallel.ParallelPlan) `compile_parallel` wrote."""
    from neuron_emu.parallel import ParallelPlan

    path = Path(model_dir) / PARALLEL_PLAN_FILE
    try:
        document = json.loads(path.read_text())
        return {int(bucket): ParallelPlan.from_dict(plan) for bucket, plan in document["buckets"].items()}
    except FileNotFoundError:
        raise SageboxError(f"{path} does not exist: not a tensor-parallel model directory") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SageboxError(f"{path} is not a tensor-parallel plan document: {exc}") from None
