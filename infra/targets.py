"""Deployment targets (`infra/targets.json`): schema, defaults and a loader with clear errors.

Pure Python: no CDK import, so `sagebox` and tests can check a targets file in milliseconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infra.errors import TargetError

DEFAULT_TARGETS_FILE = Path(__file__).resolve().parent / "targets.json"

Variant = Literal["fp32", "int8", "neuron"]
# What compiled a neuron model (the manifest's compile.backend): Sagebox's emulator (TorchScript on the host CPU)
# or AWS's torch-neuronx (graphs for NeuronCores).
NeuronBackend = Literal["neuron_emu", "torch_neuronx"]
NAME_PATTERN = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
# SageMaker's VariantName (CreateEndpointConfig, ProductionVariant): letters, digits and hyphens, <= 63 chars.
VARIANT_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"
DEFAULT_VARIANT_NAME = "AllTraffic"
# AsyncInferenceNotificationConfig's SuccessTopic/ErrorTopic pattern (SageMaker API reference).
SNS_TOPIC_ARN = r"^arn:aws[a-z\-]*:sns:[a-z0-9\-]*:[0-9]{12}:[a-zA-Z0-9_.-]+$"
BUILD_IMAGE = "build"
# Stack names derive from target names; these would collide with the app's own stacks.
RESERVED_NAMES = frozenset({"artifacts"})
S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[^\s]+)$")
# An S3 location (a bucket, or a prefix in it): where asynchronous inference reads inputs and writes outputs.
S3_PREFIX = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<prefix>[^\s]*))?$")


def s3_uri_problem(value: str) -> str:
    """Why `value` is not an s3://bucket/key URI, in one phrase."""
    return (
        f"{value!r} is not an s3://bucket/key URI (bucket: 3-63 lowercase letters, digits, '.' or '-'; "
        "then a key without spaces)"
    )


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AutoscalingSpec(_Spec):
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute), or on an
    asynchronous endpoint's queue, ApproximateBacklogSizePerInstance (`backlog_per_instance`)."""

    min_instances: int = Field(default=1, ge=1, le=100)
    max_instances: int = Field(ge=1, le=100)
    invocations_per_instance: int | None = Field(default=None, ge=1, le=100_000)
    backlog_per_instance: float | None = Field(default=None, gt=0, le=100_000)
    scale_in_cooldown_s: int = Field(default=300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(default=60, ge=0, le=3600)

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalingSpec:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")
        if (self.invocations_per_instance is None) == (self.backlog_per_instance is None):
            raise ValueError("set one of invocations_per_instance and backlog_per_instance (null clears a default's)")
        return self


class DataCaptureSpec(_Spec):
    sampling_percent: int = Field(ge=1, le=100)
    capture: tuple[Literal["input", "output"], ...] = ("input", "output")

    @field_validator("capture")
    @classmethod
    def _distinct(cls, modes: tuple[str, ...]) -> tuple[str, ...]:
        if not modes or len(set(modes)) != len(modes):
            raise ValueError("capture must list 'input' and/or 'output', each once")
        return modes


class AlarmSpec(_Spec):
    latency_p90_ms: float = Field(default=1000.0, gt=0, le=60_000)
    errors_5xx_per_minute: int = Field(default=1, ge=1)


class DeploymentSpec(_Spec):
    """Blue/green update: how long to watch the alarms on the new fleet, and how long to keep the old one."""

    bake_s: int = Field(default=300, ge=0, le=3600)
    termination_wait_s: int = Field(default=120, ge=0, le=3600)


class _VariantFields(_Spec):
    """What a variant may set for itself; a field left unset takes the target's own."""

    name: str = Field(max_length=63, pattern=VARIANT_NAME_PATTERN)
    model_data: str | None = Field(default=None, min_length=1)
    variant: Variant | None = None
    model_size_gib: float | None = Field(default=None, gt=0)
    instance_type: str | None = None
    instance_count: int | None = Field(default=None, ge=1, le=100)
    environment: dict[str, str] | None = None
    neuron_backend: NeuronBackend | None = None

    @field_validator("model_data")
    @classmethod
    def _s3_uri_complete(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("s3://") and not S3_URI.match(value):
            raise ValueError(s3_uri_problem(value))
        return value


class VariantSpec(_VariantFields):
    """One production variant of a target (CreateEndpointConfig's ProductionVariants). Requests are split among a
    target's production variants by weight (InitialVariantWeight), or sent to one with InvokeEndpoint's
    TargetVariant."""

    weight: float = Field(default=1.0, ge=0, le=1000)


class ShadowVariantSpec(_VariantFields):
    """A shadow variant (ShadowProductionVariants): SageMaker sends it a copy of `sampling_percent` % of the
    production variant's requests and records its answers; callers only ever get production's."""

    sampling_percent: int = Field(default=100, ge=1, le=100)


class ServerlessSpec(_Spec):
    """ServerlessConfig (ProductionVariantServerlessConfig): memory in 1 GB steps, 1024-6144 MB; concurrent
    invocations past `max_concurrency` are throttled."""

    memory_mb: int = Field(ge=1024, le=6144)
    max_concurrency: int = Field(ge=1, le=200)

    @field_validator("memory_mb")
    @classmethod
    def _gigabyte_steps(cls, value: int) -> int:
        if value % 1024:
            raise ValueError(f"{value} is not one of 1024, 2048, 3072, 4096, 5120, 6144 (SageMaker's memory sizes)")
        return value


def s3_prefix_problem(value: str) -> str:
    return f"{value!r} is not an s3://bucket[/prefix] location"


class AsyncSpec(_Spec):
    """AsyncInferenceConfig: requests are queued, each reads its input from S3 (InvokeEndpointAsync's InputLocation)
    and its answer is written to `output_path` (a failure to `failure_path`, else `output_path`), optionally announced
    on SNS topics. The execution role may read inputs under `input_path` only."""

    output_path: str
    input_path: str
    failure_path: str | None = None
    success_topic: str | None = Field(default=None, pattern=SNS_TOPIC_ARN)
    error_topic: str | None = Field(default=None, pattern=SNS_TOPIC_ARN)
    max_concurrent_invocations_per_instance: int | None = Field(default=None, ge=1, le=1000)

    @field_validator("output_path", "input_path", "failure_path")
    @classmethod
    def _s3_location(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not S3_PREFIX.match(value):
            raise ValueError(s3_prefix_problem(value))
        return value.rstrip("/")


class Target(_Spec):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(max_length=40, pattern=NAME_PATTERN)
    # None only for a serverless target (SageMaker chooses the compute of a serverless variant).
    instance_type: str | None = None
    variant: Variant | None = None
    model_data: str = Field(min_length=1)
    model_size_gib: float | None = Field(default=None, gt=0)
    image: str = BUILD_IMAGE
    instance_count: int = Field(default=1, ge=1, le=100)
    autoscaling: AutoscalingSpec | None = None
    data_capture: DataCaptureSpec | None = None
    alarms: AlarmSpec = AlarmSpec()
    deployment: DeploymentSpec = DeploymentSpec()
    startup_timeout_s: int | None = Field(default=None, ge=60, le=3600)
    # What AWS's guides for LLM endpoints set beside the start-up timeout (ProductionVariant's
    # ModelDataDownloadTimeoutInSeconds and VolumeSizeInGB, https://docs.aws.amazon.com/sagemaker/latest/dg/
    # large-model-inference-hosting.html): time to download large model data, and an EBS volume for it (refused on
    # instance types with local NVMe storage, which SageMaker does not give a volume to).
    model_data_download_timeout_s: int | None = Field(default=None, ge=60, le=3600)
    volume_size_gb: int | None = Field(default=None, ge=1, le=512)
    environment: dict[str, str] = Field(default_factory=dict)
    # inf2/trn1 only. The backend of model data synth cannot read (S3, or a tarball without manifest); a local
    # manifest must agree with it.
    neuron_backend: NeuronBackend | None = None
    # inf2/trn1 only. Accept a neuron_emu model: CPU inference billed at the accelerator instance's price.
    allow_emulated: bool = False
    # inf2/trn1 only. NeuronCores one model replica is sharded over (neuron_emu.parallel); the model must have been
    # compiled for it (`sagebox compile --tensor-parallel N`). The endpoint runs one server worker per N cores.
    tensor_parallel: int = Field(default=1, ge=1, le=64)
    # inf2/trn1 only. Base of the Neuron image (BASE_IMAGE of container/Dockerfile.neuron); None: its default.
    neuron_base_image: str | None = Field(default=None, min_length=1, pattern=r"^\S+$")
    # Several production variants (traffic split by weight); None: one variant, AllTraffic, of the fields above.
    production_variants: tuple[VariantSpec, ...] | None = Field(default=None, min_length=1, max_length=10)
    # Shadow variants: copies of live traffic whose answers are recorded, never returned.
    shadow_variants: tuple[ShadowVariantSpec, ...] = ()
    serverless: ServerlessSpec | None = None
    async_inference: AsyncSpec | None = Field(default=None, alias="async")

    @field_validator("model_data")
    @classmethod
    def _s3_uri_complete(cls, value: str) -> str:
        if value.startswith("s3://") and not S3_URI.match(value):
            raise ValueError(s3_uri_problem(value))
        return value

    @model_validator(mode="after")
    def _count_within_bounds(self) -> Target:
        scaling = self.autoscaling
        for name, count in self.instance_counts().items():
            if scaling and not scaling.min_instances <= count <= scaling.max_instances:
                which = "instance_count" if self.production_variants is None else f"variant {name}: instance_count"
                bounds = f"[{scaling.min_instances}, {scaling.max_instances}]"
                raise ValueError(f"{which} ({count}) is outside autoscaling bounds {bounds}")
        return self

    @model_validator(mode="after")
    def _endpoint_type(self) -> Target:
        """What SageMaker refuses of serverless, asynchronous and shadow endpoints (one line each)."""
        names = [v.name for v in self.variants()] + [s.name for s in self.shadow_variants]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"variant name {repeated[0]!r} appears more than once")
        if self.production_variants is not None and sum(v.weight for v in self.production_variants) <= 0:
            raise ValueError("production_variants: at least one weight must be above 0")
        if self.shadow_variants:
            # "If you use this field, you can only specify one variant for ProductionVariants and one variant for
            # ShadowProductionVariants" (CreateEndpointConfig, ShadowProductionVariants).
            if len(self.variants()) != 1 or len(self.shadow_variants) != 1:
                raise ValueError(
                    "shadow_variants: SageMaker allows exactly one production variant and one shadow variant"
                )
            # Shadow tests exclude serverless and asynchronous endpoints
            # (https://docs.aws.amazon.com/sagemaker/latest/dg/shadow-tests-exclusions.html).
            if self.serverless or self.async_inference:
                kind = "serverless" if self.serverless else "asynchronous"
                raise ValueError(f"shadow_variants: {kind} endpoints cannot have shadow variants")
        if self.autoscaling and self.autoscaling.backlog_per_instance is not None and self.async_inference is None:
            raise ValueError("autoscaling.backlog_per_instance tracks an asynchronous endpoint's queue: set async")
        if self.serverless is not None:
            self._check_serverless()
        elif self.instance_type is None:
            raise ValueError("instance_type is required (only a serverless target has none)")
        return self

    def _check_serverless(self) -> None:
        """Serverless feature exclusions (https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html):
        no instance type to choose, one production variant, no data capture, no asynchronous inference, and it
        scales by itself (MaxConcurrency), not by Application Auto Scaling on instance counts."""
        where = "serverless"
        if self.instance_type is not None or any(v.instance_type for v in self.production_variants or ()):
            raise ValueError(f"{where}: a serverless endpoint has no instance type (remove instance_type)")
        if len(self.variants()) > 1:
            raise ValueError(f"{where}: a serverless endpoint has one production variant")
        if self.instance_count != 1 or any(v.instance_count for v in self.production_variants or ()):
            raise ValueError(f"{where}: a serverless endpoint has no instance count (remove instance_count)")
        if self.autoscaling is not None:
            raise ValueError(
                f"{where}: a serverless endpoint scales by itself up to max_concurrency; set autoscaling: null"
            )
        if self.data_capture is not None:
            raise ValueError(f"{where}: SageMaker does not capture data of serverless endpoints (remove data_capture)")
        if self.async_inference is not None:
            raise ValueError(f"{where}: asynchronous inference needs instances; a target is serverless or async")

    def variants(self) -> tuple[VariantSpec, ...]:
        """The production variants: the listed ones, or one AllTraffic variant of the target's own fields."""
        return self.production_variants or (VariantSpec(name=DEFAULT_VARIANT_NAME),)

    def instance_counts(self) -> dict[str, int]:
        return {v.name: v.instance_count or self.instance_count for v in self.variants()}


def merge_defaults(defaults: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """Target keys win; nested objects merge one level deep; a null in the target clears a default."""
    merged = dict(defaults)
    for key, value in target.items():
        base = merged.get(key)
        if isinstance(base, Mapping) and isinstance(value, Mapping):
            merged[key] = {**base, **value}
        else:
            merged[key] = value
    return merged


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}"


def parse_targets(data: Any, where: str = "targets") -> list[Target]:
    """Validate the decoded JSON of a targets file: {"defaults": {...}, "targets": [{...}, ...]}."""
    if not isinstance(data, Mapping):
        raise TargetError(f"{where}: expected an object with a 'targets' list")
    unknown = sorted(set(data) - {"defaults", "targets"} - {k for k in data if str(k).startswith("_")})
    if unknown:
        raise TargetError(f"{where}: unknown top-level key(s) {', '.join(unknown)} (allowed: defaults, targets)")
    defaults = data.get("defaults", {})
    raw_targets = data.get("targets")
    if not isinstance(defaults, Mapping):
        raise TargetError(f"{where}: 'defaults' must be an object")
    if not isinstance(raw_targets, Sequence) or isinstance(raw_targets, str) or not raw_targets:
        raise TargetError(f"{where}: 'targets' must be a non-empty list")
    targets: list[Target] = []
    for index, raw in enumerate(raw_targets):
        if not isinstance(raw, Mapping):
            raise TargetError(f"{where}: targets[{index}] must be an object")
        label = f"targets[{index}]" + (f" ({raw['name']})" if isinstance(raw.get("name"), str) else "")
        try:
            targets.append(Target.model_validate(merge_defaults(defaults, raw)))
        except ValidationError as exc:
            raise TargetError(f"{where}: {label}: {_describe(exc)}") from None
    _check_names(targets, where)
    return targets


def _check_names(targets: Sequence[Target], where: str) -> None:
    seen: set[str] = set()
    for target in targets:
        if target.name in RESERVED_NAMES:
            raise TargetError(f"{where}: target name {target.name!r} is reserved for the app's own stacks")
        if target.name in seen:
            raise TargetError(f"{where}: target name {target.name!r} appears more than once")
        seen.add(target.name)


def load_target_files(paths: Sequence[Path]) -> list[Target]:
    """The targets of several files, in order (each file's defaults apply to its own targets); a name may appear
    in only one of them."""
    targets = [target for path in paths for target in load_targets(path)]
    _check_names(targets, " + ".join(str(p) for p in paths))
    return targets


def load_targets(path: Path = DEFAULT_TARGETS_FILE) -> list[Target]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TargetError(f"targets file {path} does not exist") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TargetError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_targets(data, str(path))


def select(targets: Sequence[Target], names: Sequence[str] | None) -> list[Target]:
    """The targets named in `names`, in file order; all of them when `names` is None."""
    if names is None:
        return list(targets)
    known = {t.name for t in targets}
    missing = [n for n in names if n not in known]
    if missing:
        raise TargetError(f"unknown target(s) {', '.join(missing)} (known: {', '.join(sorted(known))})")
    wanted = set(names)
    return [t for t in targets if t.name in wanted]
