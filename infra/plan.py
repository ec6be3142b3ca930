"""Resolve targets into endpoint plans: what each endpoint stack renders, validated, without CDK."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from container import env as container_env
from container.manifest import CompileSpec
from infra.catalog import CatalogError, InstanceSpec, instance
from infra.errors import MissingArtifact, TargetError
from infra.model_artifact import ArtifactInfo, inspect_artifact, read_member
from infra.rules import check_emulation, check_serverless, check_size, check_tensor_parallel, check_variant
from infra.settings import AppSettings
from infra.targets import (
    BUILD_IMAGE,
    DEFAULT_VARIANT_NAME,
    S3_URI,
    AsyncSpec,
    NeuronBackend,
    ServerlessSpec,
    ShadowVariantSpec,
    Target,
    Variant,
    VariantSpec,
    s3_uri_problem,
    select,
)

VARIANT_NAME = DEFAULT_VARIANT_NAME
SERVERLESS = "serverless"
# AWS Lambda, on which Serverless Inference runs, gives a function one vCPU per 1,769 MB of memory (Lambda's
# "Configure function memory" page); SageMaker does not document the vCPUs of a serverless variant, so the
# container's threads are sized on Lambda's ratio: an estimate.
MB_PER_SERVERLESS_VCPU = 1769
MAX_ENDPOINT_NAME = 63
# Never part of an image's build context, whatever the context's .dockerignore says: keeps synth fast.
IMAGE_EXCLUDES: tuple[str, ...] = (
    ".git",
    ".venv",
    "node_modules",
    "cdk.out",
    ".sagebox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "**/__pycache__",
)
# SageMaker sets these itself: the container must listen on 8080 (all interfaces) and read /opt/ml/model.
PLATFORM_ENV = frozenset({container_env.BIND_TO_PORT, container_env.MODEL_DIR, container_env.BIND_HOST})
ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?P<cn>\.cn)?"
    r"/(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})?$"
)


@dataclass(frozen=True)
class LocalModel:
    path: Path


@dataclass(frozen=True)
class S3Model:
    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class BuildImage:
    context: Path
    dockerfile: str
    exclude: tuple[str, ...]
    build_args: Mapping[str, str]


@dataclass(frozen=True)
class EcrRepository:
    partition: str
    region: str
    account: str
    name: str

    @property
    def arn(self) -> str:
        return f"arn:{self.partition}:ecr:{self.region}:{self.account}:repository/{self.name}"


@dataclass(frozen=True)
class RegistryImage:
    uri: str
    repository: EcrRepository | None


@dataclass(frozen=True)
class VariantPlan:
    """One production or shadow variant as the endpoint config renders it."""

    name: str
    weight: float  # InitialVariantWeight; a shadow's is the production weight times its sampling share
    instance: InstanceSpec  # a serverless variant's is SERVERLESS (its memory, estimated vCPUs)
    instance_count: int
    variant: Variant
    model: LocalModel | S3Model
    model_size_bytes: int | None
    image: BuildImage | RegistryImage
    environment: Mapping[str, str]
    neuron_backend: NeuronBackend | None = None
    shadow: bool = False
    sampling_percent: int | None = None  # shadows: the share of production's requests they get a copy of


@dataclass(frozen=True)
class EndpointPlan:
    target: Target
    stack_name: str
    endpoint_name: str
    instance: InstanceSpec
    variant: Variant
    model: LocalModel | S3Model
    model_size_bytes: int | None
    image: BuildImage | RegistryImage
    environment: Mapping[str, str]
    startup_timeout_s: int
    canary_instances: int | None
    max_deployment_s: int
    # What compiled the model of a Neuron target (None on CPU targets).
    neuron_backend: NeuronBackend | None = None
    # NeuronCores one model replica spans (the target's tensor_parallel; 1 on CPU targets).
    tensor_parallel: int = 1
    # Every production variant (the first is the one the fields above describe), and the shadow variants.
    variants: tuple[VariantPlan, ...] = ()
    shadows: tuple[VariantPlan, ...] = ()
    serverless: ServerlessSpec | None = None
    async_inference: AsyncSpec | None = None
    model_data_download_timeout_s: int | None = None
    volume_size_gb: int | None = None

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def volume_kms(self) -> bool:
        """A KMS key for the instances' storage volumes: not on instance-store types, nor on serverless variants
        (which have no instance volume to encrypt), so never when any variant is one of those."""
        instances = [v.instance for v in (*self.variants, *self.shadows)] or [self.instance]
        return self.serverless is None and all(i.supports_volume_kms_key for i in instances)

    @property
    def single_default_variant(self) -> bool:
        """One production variant named AllTraffic and no shadow: the endpoint of a target that lists no variants."""
        return [v.name for v in self.variants] in ([], [VARIANT_NAME]) and not self.shadows


def artifacts_stack_name(prefix: str) -> str:
    return f"{prefix}-artifacts"


def parse_ecr_uri(uri: str) -> EcrRepository | None:
    match = ECR_URI.match(uri)
    if not match:
        return None
    region = match["region"]
    partition = "aws-cn" if match["cn"] else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    return EcrRepository(partition=partition, region=region, account=match["account"], name=match["repository"])


def _build_image(
    target: str, settings: AppSettings, dockerfile: str, key: str, what: str
) -> tuple[Path, tuple[str, ...]]:
    """The build context's Dockerfile check and the exclusions every image asset shares."""
    path = settings.build_context / dockerfile
    if not path.is_file():
        raise TargetError(
            f"target {target!r}: {what} needs {path}, which does not exist "
            f"(set build_context and {key}, e.g. cdk -c build_context=... -c {key}=..., or give an ECR image URI)"
        )
    # Model data reaches the endpoint as ModelDataUrl, never through the image.
    exclude = IMAGE_EXCLUDES
    model_dir, context = settings.model_dir.resolve(), settings.build_context.resolve()
    if model_dir != context and model_dir.is_relative_to(context):
        exclude += (model_dir.relative_to(context).as_posix(),)
    return context, exclude


def resolve_image(target: str, image: str, settings: AppSettings) -> BuildImage | RegistryImage:
    """The CPU serving image (`build`: container/Dockerfile, with the offline build arguments), or an ECR image."""
    if image == BUILD_IMAGE:
        context, exclude = _build_image(target, settings, settings.dockerfile, "dockerfile", "image 'build'")
        build_args: dict[str, str] = {}
        if settings.base_image:
            build_args["BASE_IMAGE"] = settings.base_image
        if settings.wheelhouse is not None:
            wheelhouse = _wheelhouse(target, settings.wheelhouse, context)
            build_args["WHEELHOUSE"] = wheelhouse
            exclude += (f"!{wheelhouse}/",)  # staged into the asset whatever .dockerignore says
        return BuildImage(
            context=settings.build_context, dockerfile=settings.dockerfile, exclude=exclude, build_args=build_args
        )
    repository = parse_ecr_uri(image)
    if repository is None:
        raise TargetError(
            f"target {target!r}: image {image!r} is neither 'build' nor an ECR image URI "
            "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY[:TAG|@sha256:DIGEST])"
        )
    return RegistryImage(uri=image, repository=repository)


def resolve_neuron_image(target: str, settings: AppSettings, base_image: str | None) -> BuildImage:
    """The Neuron serving image (container/Dockerfile.neuron on an AWS Neuron PyTorch DLC) of torch_neuronx models.

    Its only build argument is its own BASE_IMAGE (the target's neuron_base_image); the CPU image's offline build
    arguments (base_image, wheelhouse) do not apply to it.
    """
    _, exclude = _build_image(
        target, settings, settings.neuron_dockerfile, "neuron_dockerfile", "the Neuron image of a torch_neuronx model"
    )
    return BuildImage(
        context=settings.build_context,
        dockerfile=settings.neuron_dockerfile,
        exclude=exclude,
        build_args={"BASE_IMAGE": base_image} if base_image else {},
    )


def _wheelhouse(target: str, path: Path, context: Path) -> str:
    """The wheelhouse as the Dockerfile's WHEELHOUSE argument: a folder of wheels inside the build context."""
    path = path.resolve()
    if not path.is_relative_to(context):
        raise TargetError(f"target {target!r}: wheelhouse {path} must be inside the build context {context}")
    if not path.is_dir() or not any(path.glob("*.whl")):
        raise TargetError(f"target {target!r}: wheelhouse {path} is not a folder of wheels")
    return path.relative_to(context).as_posix()


def resolve_model(
    target: str, model_data: str, settings: AppSettings
) -> tuple[LocalModel | S3Model, ArtifactInfo | None]:
    match = S3_URI.match(model_data)
    if match:
        return S3Model(bucket=match["bucket"], key=match["key"]), None
    if model_data.startswith("s3://"):
        raise TargetError(f"target {target!r}: model_data {s3_uri_problem(model_data)}")
    path = Path(model_data).expanduser()
    path = path if path.is_absolute() else settings.model_dir / path
    if not path.exists():
        raise MissingArtifact(
            f"target {target!r}: model artifact {path} does not exist "
            "(package it with `sagebox build --out build/models`, or run `make demo` for the demo's, or set model_dir "
            "to the directory holding it: cdk -c model_dir=...)"
        )
    try:
        info = inspect_artifact(path)
    except TargetError as exc:
        raise TargetError(f"target {target!r}: {exc}") from None
    return LocalModel(path=info.path), info


def resolve_variant(target: Target, artifact: ArtifactInfo | None) -> Variant:
    found = artifact.manifest.variant if artifact and artifact.manifest else None
    if target.variant and found and target.variant != found:
        raise TargetError(
            f"target {target.name!r}: declares variant {target.variant!r} but the manifest inside "
            f"{artifact.path if artifact else 'the model'} says {found!r}"
        )
    variant = target.variant or found
    if variant is None:
        where = "its tarball has no manifest.json" if artifact else "synth cannot read a manifest from S3"
        raise TargetError(f'target {target.name!r}: set "variant" (fp32, int8 or neuron): {where}')
    return variant


def resolve_neuron_backend(target: Target, artifact: ArtifactInfo | None) -> NeuronBackend:
    """What compiled a neuron model: its manifest's compile.backend, else the target's neuron_backend."""
    manifest = artifact.manifest if artifact else None
    if manifest is not None and manifest.compile is None:
        raise TargetError(
            f"target {target.name!r}: the neuron manifest inside {artifact.path if artifact else 'the model'} records "
            "no compile section: compile the model again with `sagebox compile`"
        )
    found = manifest.compile.backend if manifest and manifest.compile else None
    if target.neuron_backend and found and target.neuron_backend != found:
        raise TargetError(
            f"target {target.name!r}: declares neuron_backend {target.neuron_backend!r} but the manifest inside "
            f"{artifact.path if artifact else 'the model'} says {found!r}"
        )
    backend = target.neuron_backend or found
    if backend is None:
        where = "its tarball has no manifest.json" if artifact else "synth cannot read a manifest from S3"
        raise TargetError(
            f'target {target.name!r}: set "neuron_backend" (torch_neuronx, or neuron_emu with allow_emulated): {where}'
        )
    return backend


def serverless_instance(serverless: ServerlessSpec) -> InstanceSpec:
    """What a serverless variant runs on, for sizing: its memory and an estimate of its vCPUs (see
    MB_PER_SERVERLESS_VCPU); never a real instance type."""
    return InstanceSpec(
        name=SERVERLESS,
        family=SERVERLESS,
        vcpus=max(1, round(serverless.memory_mb / MB_PER_SERVERLESS_VCPU)),
        memory_gib=serverless.memory_mb // 1024,
        accelerator="cpu",
        chips=0,
        instance_storage=False,
        neuron_cores_per_chip=0,
        hbm_gib_per_chip=0,
    )


def container_environment(
    target: str, spec: InstanceSpec, overrides: Mapping[str, str], tensor_parallel: int = 1
) -> dict[str, str]:
    """Server settings sized to the instance, plus overrides, checked by the container's own parser.

    CPU: one worker per 4 vCPUs. Neuron: one worker per model replica, i.e. per NeuronCore, or per `tensor_parallel`
    cores when a replica is sharded over several (each worker then runs that many sharded workers of its own).
    """
    known = {
        value
        for name, value in vars(container_env).items()
        if name.isupper() and isinstance(value, str) and value.startswith(("SAGEMAKER_", "SAGEBOX_"))
    } | set(container_env.TGI_VARIABLES)
    for key in overrides:
        if key in PLATFORM_ENV:
            raise TargetError(f"target {target!r}: environment {key} is set by SageMaker and cannot be overridden")
        if key not in known:
            raise TargetError(
                f"target {target!r}: environment {key} is not read by the serving container "
                f"(known: {', '.join(sorted(known - PLATFORM_ENV))})"
            )
    workers = max(1, spec.neuron_cores // tensor_parallel) if spec.is_neuron else max(1, spec.vcpus // 4)
    environment = {
        container_env.MODEL_SERVER_WORKERS: str(workers),
        container_env.INTRA_OP_THREADS: str(max(1, spec.vcpus // workers)),
        container_env.MODEL_SERVER_TIMEOUT: "60",
        container_env.LOG_LEVEL: "info",
        **overrides,
    }
    try:
        container_env.ServerSettings.from_env(environment)
    except container_env.EnvError as exc:
        raise TargetError(f"target {target!r}: environment: {exc}") from None
    return environment


def _instance_of(target: Target, instance_type: str | None) -> InstanceSpec:
    if target.serverless is not None:
        return serverless_instance(target.serverless)
    try:
        return instance(str(instance_type))
    except CatalogError as exc:
        raise TargetError(f"target {target.name!r}: {exc}") from None


def _serving_dtype(compiled: CompileSpec | None) -> str:
    """The dtype a compiled decoder keeps its weights and KV cache in: the auto-cast type (bf16, fp16), FP32 when
    nothing is cast, bf16 when the manifest does not say (or casts to a type the cost model does not size)."""
    if compiled is None:
        return "bf16"
    if compiled.auto_cast == "none":
        return "fp32"
    return compiled.auto_cast_type if compiled.auto_cast_type in ("bf16", "fp16", "fp32") else "bf16"


def check_decoder_fit(target: str, spec: InstanceSpec, degree: int, artifact: ArtifactInfo) -> None:
    """A text-generation model on an inf2/trn1 instance must fit each NeuronCore's HBM at the artifact's
    tensor-parallel degree: its weights / degree, the KV cache of its compiled batch lines (compile.batch_size, 1 when
    not recorded) at the manifest's context length, and the runtime's reserve (neuron_emu.llm.cost, from the
    config.json inside the tarball). Skipped, as the other artifact checks are, when the tarball has no manifest or no
    config to read."""
    manifest = artifact.manifest
    if not spec.is_neuron or manifest is None or manifest.task != "text-generation" or manifest.generation is None:
        return
    from neuron_emu.llm.config import UnsupportedModel, read_config
    from neuron_emu.llm.cost.sizing import decoder_fit

    generation = manifest.generation
    where = f"{artifact.path}!{generation.config_file}"
    data = read_member(artifact.path, generation.config_file)
    if data is None:
        return
    try:
        config = read_config(json.loads(data))
    except (ValueError, TypeError, AttributeError, UnsupportedModel) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TargetError(f"target {target!r}: {where} is not a decoder config the planner reads: {first}") from None
    compiled = manifest.compile
    tp = compiled.tensor_parallel if compiled is not None else degree
    dtype = _serving_dtype(compiled)
    batch = int(getattr(compiled, "batch_size", None) or 1)
    context = generation.context_length
    fit = decoder_fit(config, spec.name, tp, dtype=dtype, sequence=context, batch=batch)
    if fit.fits:
        return
    gib = 2**30
    raise TargetError(
        f"target {target!r}: model {manifest.source.name} does not fit {spec.name} at tensor_parallel {tp}: "
        f"{fit.needed_bytes / gib:.1f} GiB per NeuronCore needed ({dtype} weights {fit.weights_bytes / gib:.1f} GiB, "
        f"KV cache of {batch} x {context} tokens {fit.kv_bytes / gib:.1f} GiB, runtime reserve "
        f"{fit.reserve_bytes / gib:.1f} GiB), {fit.hbm_bytes / gib:.1f} GiB available (`sagebox plan` lists the sizes "
        "and degrees that fit)"
    )


def plan_variant(
    target: Target, entry: VariantSpec | ShadowVariantSpec, settings: AppSettings, production_weight: float = 1.0
) -> VariantPlan:
    """One variant: the entry's own fields, else the target's, checked as a whole target's are."""
    shadow = isinstance(entry, ShadowVariantSpec)
    spec = _instance_of(target, entry.instance_type or target.instance_type)
    # `-c model_data=target=s3://...` replaces the target's own model data, not a variant's that names its own.
    model_data = entry.model_data or settings.model_data.get(target.name, target.model_data)
    model, artifact = resolve_model(target.name, model_data, settings)
    effective = target.model_copy(
        update={
            "variant": entry.variant or (target.variant if entry.model_data is None else None),
            "neuron_backend": entry.neuron_backend or (target.neuron_backend if entry.model_data is None else None),
        }
    )
    variant = resolve_variant(effective, artifact)
    given_size = entry.model_size_gib or (target.model_size_gib if entry.model_data is None else None)
    if given_size is not None:
        size_bytes: int | None = int(given_size * 2**30)
    else:
        size_bytes = artifact.size_bytes if artifact else None
    if target.serverless is not None:
        check_serverless(target.name, variant, size_bytes, target.serverless.memory_mb)
    else:
        check_variant(target.name, variant, spec)
    backend = resolve_neuron_backend(effective, artifact) if variant == "neuron" else None
    if backend is not None:
        check_emulation(target.name, backend, spec, allowed=target.allow_emulated or settings.allow_emulated)
    manifest = artifact.manifest if artifact else None
    check_tensor_parallel(
        target.name,
        target.tensor_parallel,
        variant,
        spec,
        backend,
        manifest.compile if manifest else None,
        where=f"the model inside {artifact.path}" if artifact else "the model",
    )
    if size_bytes is not None and target.serverless is None:
        check_size(target.name, size_bytes, spec)
    if artifact is not None:
        check_decoder_fit(target.name, spec, target.tensor_parallel, artifact)
    image_ref = settings.image_uri or target.image
    # The image follows the artifact: torch_neuronx graphs need the Neuron image; neuron_emu graphs are TorchScript
    # on the host CPU and run in the CPU image (on inf2/trn1 only when emulation is allowed, checked above).
    if image_ref == BUILD_IMAGE and backend == "torch_neuronx":
        image: BuildImage | RegistryImage = resolve_neuron_image(target.name, settings, target.neuron_base_image)
    else:
        image = resolve_image(target.name, image_ref, settings)
    overrides = target.environment if entry.environment is None else {**target.environment, **entry.environment}
    sampling = entry.sampling_percent if isinstance(entry, ShadowVariantSpec) else None
    return VariantPlan(
        name=entry.name,
        weight=production_weight * (sampling or 100) / 100 if shadow else entry.weight,  # type: ignore[union-attr]
        instance=spec,
        instance_count=entry.instance_count or target.instance_count,
        variant=variant,
        model=model,
        model_size_bytes=size_bytes,
        image=image,
        environment=container_environment(target.name, spec, overrides, target.tensor_parallel),
        neuron_backend=backend,
        shadow=shadow,
        sampling_percent=sampling,
    )


def plan_endpoint(target: Target, settings: AppSettings) -> EndpointPlan:
    endpoint_name = f"{settings.prefix}-{target.name}"
    if len(endpoint_name) > MAX_ENDPOINT_NAME:
        raise TargetError(f"target {target.name!r}: endpoint name {endpoint_name!r} exceeds {MAX_ENDPOINT_NAME} chars")
    variants = tuple(plan_variant(target, entry, settings) for entry in target.variants())
    production_weight = variants[0].weight
    shadows = tuple(plan_variant(target, entry, settings, production_weight) for entry in target.shadow_variants)
    primary = variants[0]
    spec = primary.instance
    startup = target.startup_timeout_s or (900 if any(v.instance.is_neuron for v in variants + shadows) else 300)
    counts = target.instance_counts()
    floor = target.autoscaling.min_instances if target.autoscaling else min(counts.values())
    deployment = target.deployment
    return EndpointPlan(
        target=target,
        stack_name=endpoint_name,
        endpoint_name=endpoint_name,
        instance=spec,
        variant=primary.variant,
        model=primary.model,
        model_size_bytes=primary.model_size_bytes,
        image=primary.image,
        environment=primary.environment,
        startup_timeout_s=startup,
        # A canary is at most half the fleet: one instance shifts all at once (alarms still watched). A serverless
        # endpoint has no instances to count: all at once.
        canary_instances=1 if floor >= 2 and target.serverless is None else None,
        max_deployment_s=min(14_400, max(600, 2 * deployment.bake_s + deployment.termination_wait_s + startup + 600)),
        neuron_backend=primary.neuron_backend,
        tensor_parallel=target.tensor_parallel,
        variants=variants,
        shadows=shadows,
        serverless=target.serverless,
        async_inference=target.async_inference,
        model_data_download_timeout_s=target.model_data_download_timeout_s,
        volume_size_gb=_volume_size(target, variants + shadows),
    )


def _volume_size(target: Target, variants: tuple[VariantPlan, ...]) -> int | None:
    if target.volume_size_gb is None:
        return None
    stores = sorted({v.instance.name for v in variants if v.instance.instance_storage})
    if stores or target.serverless is not None:
        what = ", ".join(stores) if stores else "a serverless endpoint"
        raise TargetError(f"target {target.name!r}: volume_size_gb is not allowed on {what} (no EBS volume)")
    return target.volume_size_gb


def plan_endpoints(targets: Sequence[Target], settings: AppSettings) -> list[EndpointPlan]:
    plans = plan_endpoints_or_missing(targets, settings)
    for plan in plans:
        if isinstance(plan, MissingArtifact):
            raise plan
    return [p for p in plans if isinstance(p, EndpointPlan)]


def plan_endpoints_or_missing(targets: Sequence[Target], settings: AppSettings) -> list[EndpointPlan | MissingArtifact]:
    """Every selected target's plan, or the MissingArtifact error of a target whose local model is not there; any
    other problem raises."""
    unknown = sorted(set(settings.model_data) - {t.name for t in targets})
    if unknown:
        raise TargetError(f"model_data given for unknown target(s) {', '.join(unknown)}")
    plans: list[EndpointPlan | MissingArtifact] = []
    for target in select(targets, settings.only):
        try:
            plans.append(plan_endpoint(target, settings))
        except MissingArtifact as exc:
            plans.append(exc)
    return plans
