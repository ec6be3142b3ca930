"""Placement rules checked at synth: which artifact variant may run on which instance, and whether it fits."""

from __future__ import annotations

from container.manifest import CompileSpec
from infra.catalog import InstanceSpec, instances
from infra.errors import TargetError


def neuron_families() -> list[str]:
    return sorted({spec.family for spec in instances().values() if spec.is_neuron})


def check_variant(target: str, variant: str, spec: InstanceSpec) -> None:
    """Neuron artifacts run only on Neuron instances; CPU artifacts (fp32, int8) only on CPU instances."""
    families = "/".join(neuron_families())
    if variant == "neuron" and not spec.is_neuron:
        raise TargetError(
            f"target {target!r}: a 'neuron' artifact is compiled for AWS Neuron and runs only on {families} "
            f"instances, not on {spec.name} (a CPU instance)"
        )
    if variant != "neuron" and spec.is_neuron:
        raise TargetError(
            f"target {target!r}: {variant!r} is a CPU artifact and cannot use the {spec.accelerator} "
            f"chips of {spec.name}: deploy a 'neuron' artifact there, or choose a CPU instance"
        )


def check_size(target: str, size_bytes: int, spec: InstanceSpec) -> None:
    """The model must fit the memory holding it: accelerator HBM on Neuron instances, RAM on CPU ones."""
    size_gib = size_bytes / 2**30
    if spec.is_neuron:
        limit, what = (
            spec.accelerator_memory_gib,
            (f"accelerator memory of {spec.name} ({spec.chips} chip(s) x {spec.hbm_gib_per_chip} GiB)"),
        )
    else:
        limit, what = spec.memory_gib, f"memory of {spec.name}"
    if size_gib > limit:
        raise TargetError(f"target {target!r}: the model ({size_gib:.1f} GiB) is larger than the {limit} GiB {what}")


def check_emulation(target: str, backend: str, spec: InstanceSpec, *, allowed: bool) -> None:
    """A neuron_emu model is TorchScript on the host CPU: on an inf2/trn1 instance that is CPU inference billed at
    the accelerator's price. Refused unless the target or the app allows it (the local box does)."""
    if backend == "neuron_emu" and spec.is_neuron and not allowed:
        raise TargetError(
            f"target {target!r}: the model was compiled by neuron_emu, an emulator whose graphs run on the host CPU: "
            f"on {spec.name} that is CPU inference at accelerator prices; compile it with `sagebox compile --backend "
            "torch-neuronx` on a Neuron host or in the AWS Neuron PyTorch DLC, or set allow_emulated: true (target "
            "field, or -c allow_emulated=true) to accept that"
        )


def check_tensor_parallel(
    target: str,
    degree: int,
    variant: str,
    spec: InstanceSpec,
    backend: str | None,
    compiled: CompileSpec | None,
    where: str = "the model",
) -> None:
    """A tensor-parallel target: a neuron_emu model on an instance with enough NeuronCores, compiled for the degree,
    whose attention heads the degree divides. `compiled` is the local manifest's compile section (None: S3 or no
    manifest, so only the instance and backend can be checked)."""
    if degree > 1 and (variant != "neuron" or not spec.is_neuron):
        raise TargetError(
            f"target {target!r}: tensor_parallel {degree} shards a neuron model over NeuronCores; "
            f"{spec.name} with a {variant!r} artifact has none to shard over (set tensor_parallel: 1)"
        )
    if not spec.is_neuron:
        return
    if degree > spec.neuron_cores:
        raise TargetError(
            f"target {target!r}: tensor_parallel {degree} exceeds the {spec.neuron_cores} NeuronCores of {spec.name}"
        )
    if degree > 1 and backend == "torch_neuronx":
        raise TargetError(
            f"target {target!r}: tensor_parallel {degree} is served only for neuron_emu models here, not torch_neuronx"
        )
    if compiled is None:
        return
    if compiled.tensor_parallel != degree:
        raise TargetError(
            f"target {target!r}: sets tensor_parallel {degree} but {where} was compiled for tensor_parallel "
            f"{compiled.tensor_parallel}: compile it with `sagebox compile --tensor-parallel {degree}`, or set "
            f"tensor_parallel: {compiled.tensor_parallel}"
        )
    heads = compiled.num_attention_heads
    if heads is not None and heads % degree:
        raise TargetError(
            f"target {target!r}: tensor_parallel {degree} does not divide the model's {heads} attention heads"
        )


def check_serverless(target: str, variant: str, size_bytes: int | None, memory_mb: int) -> None:
    """Serverless variants run on CPU only ("Serverless Inference does not support GPUs", nor Inferentia/Trainium:
    https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html, feature exclusions), and the model
    must fit the memory the variant asks for (its MemorySizeInMB)."""
    if variant == "neuron":
        raise TargetError(
            f"target {target!r}: a serverless endpoint runs on CPU only (no GPU, Inferentia or Trainium): deploy an "
            "fp32 or int8 artifact, or give the target an inf2/trn1 instance_type instead of serverless"
        )
    if size_bytes is not None and size_bytes > memory_mb * 2**20:
        raise TargetError(
            f"target {target!r}: the model ({size_bytes / 2**20:.0f} MiB) is larger than the serverless memory "
            f"({memory_mb} MB): raise serverless.memory_mb (up to 6144)"
        )
