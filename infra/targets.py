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
BUILD_IMAGE = "build"
# Stack names derive from target names; these would collide with the app's own stacks.
RESERVED_NAMES = frozenset({"artifacts"})
S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[^\s]+)$")


def s3_uri_problem(value: str) -> str:
    """Why `value` is not an s3://bucket/key URI, in one phrase."""
    return (
        f"{value!r} is not an s3://bucket/key URI (bucket: 3-63 lowercase letters, digits, '.' or '-'; "
        "then a key without spaces)"
    )


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AutoscalingSpec(_Spec):
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""

    min_instances: int = Field(default=1, ge=1, le=100)
    max_instances: int = Field(ge=1, le=100)
    invocations_per_instance: int = Field(ge=1, le=100_000)
    scale_in_cooldown_s: int = Field(default=300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(default=60, ge=0, le=3600)

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalingSpec:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")
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


class Target(_Spec):
    name: str = Field(max_length=40, pattern=NAME_PATTERN)
    instance_type: str
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

    @field_validator("model_data")
    @classmethod
    def _s3_uri_complete(cls, value: str) -> str:
        if value.startswith("s3://") and not S3_URI.match(value):
            raise ValueError(s3_uri_problem(value))
        return value

    @model_validator(mode="after")
    def _count_within_bounds(self) -> Target:
        scaling = self.autoscaling
        if scaling and not scaling.min_instances <= self.instance_count <= scaling.max_instances:
            raise ValueError(
                f"instance_count ({self.instance_count}) is outside autoscaling bounds "
                f"[{scaling.min_instances}, {scaling.max_instances}]"
            )
        return self


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
