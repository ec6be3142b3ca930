"""App settings and their CDK context keys (`cdk synth -c targets=... -c model_dir=...`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.errors import InfraError
from infra.targets import DEFAULT_TARGETS_FILE

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL_DIR = REPO_ROOT / "build" / "models"
# The demo's packaged models, as `make demo` (`sagebox up`) leaves them: a link to the copy cached in
# ~/.cache/sagebox. The app falls back on it when build/models holds no packaged model.
DEMO_MODEL_DIR = REPO_ROOT / "build" / "demo-models"
DEFAULT_DOCKERFILE = "container/Dockerfile"
DEFAULT_NEURON_DOCKERFILE = "container/Dockerfile.neuron"
PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")

# Context key -> what it sets (README and `--help`-style errors list these).
CONTEXT_KEYS: dict[str, str] = {
    "targets": "path of the targets file, or several comma-separated (default infra/targets.json)",
    "model_dir": "directory that relative model_data paths are resolved against (default build/models, or the "
    "demo's build/demo-models when build/models holds no packaged model)",
    "only": "comma-separated target names to synthesize (default: all)",
    "prefix": "name prefix of stacks and endpoints (default sagebox)",
    "image_uri": "image URI used by every target instead of its own image",
    "model_data": 'per-target model data, JSON {"target": "s3://..."} or target=uri,target=uri',
    "cfn_validate": "true: also run CDK's CloudFormation schema validation (findings fail the synth; slower)",
    "build_context": "docker build context of 'build' images (default: the repository root)",
    "dockerfile": "Dockerfile path inside the build context (default container/Dockerfile)",
    "neuron_dockerfile": "Dockerfile of the Neuron image of torch_neuronx models (default container/Dockerfile.neuron)",
    "base_image": "base image of 'build' images (build argument BASE_IMAGE; default: ECR Public's Python image)",
    "wheelhouse": "folder of wheels inside the build context: pip installs from it alone (offline builds)",
    "allow_emulated": "true: inf2/trn1 targets may serve neuron_emu models on the host CPU (the local box sets it)",
}
# Environment variables that stand for a context key when the CLI does not pass it (`sagebox env` sets them for
# the offline box, so that `npx cdk deploy` runs unchanged there).
CONTEXT_ENV: dict[str, str] = {
    "base_image": "SAGEBOX_BASE_IMAGE",
    "wheelhouse": "SAGEBOX_WHEELHOUSE",
    "allow_emulated": "SAGEBOX_ALLOW_EMULATED",
}


@dataclass(frozen=True)
class AppSettings:
    # Several files add up (each file's defaults apply to its own targets): `-c targets=a.json,b.json`.
    targets_files: tuple[Path, ...] = (DEFAULT_TARGETS_FILE,)
    model_dir: Path = DEFAULT_MODEL_DIR
    prefix: str = "sagebox"
    only: tuple[str, ...] | None = None
    image_uri: str | None = None
    model_data: Mapping[str, str] = field(default_factory=dict)
    cfn_validate: bool = False
    build_context: Path = REPO_ROOT
    dockerfile: str = DEFAULT_DOCKERFILE
    neuron_dockerfile: str = DEFAULT_NEURON_DOCKERFILE
    base_image: str | None = None
    wheelhouse: Path | None = None
    # Emulator-compiled models on inf2/trn1 are CPU inference at accelerator prices: refused unless allowed here
    # (every target) or by the target itself.
    allow_emulated: bool = False

    @property
    def targets_file(self) -> Path:
        """The first targets file."""
        return self.targets_files[0]

    def __post_init__(self) -> None:
        if not self.targets_files:
            raise InfraError("context 'targets' names no targets file")
        if not PREFIX_PATTERN.match(self.prefix) or len(self.prefix) > 20:
            raise InfraError(
                f"prefix {self.prefix!r} must be lowercase letters, digits and single hyphens, <= 20 chars"
            )

    @classmethod
    def from_context(cls, context: Mapping[str, Any], cwd: Path, env: Mapping[str, str] | None = None) -> AppSettings:
        """Build settings from CDK context values (strings from `-c`, JSON values from cdk.json), with the
        environment variables of CONTEXT_ENV standing in for keys the context does not set."""
        env = os.environ if env is None else env
        context = {**{k: env[v] for k, v in CONTEXT_ENV.items() if env.get(v, "").strip()}, **context}
        values: dict[str, Any] = {}
        if context.get("targets") not in (None, ""):
            raw = context["targets"]
            items = raw if isinstance(raw, list) else str(raw).split(",")
            values["targets_files"] = tuple((cwd / str(item).strip()).resolve() for item in items if str(item).strip())
        for key, attr in (
            ("model_dir", "model_dir"),
            ("build_context", "build_context"),
            ("wheelhouse", "wheelhouse"),
        ):
            if context.get(key) not in (None, ""):
                values[attr] = (cwd / str(context[key])).resolve()
        for key in ("prefix", "image_uri", "dockerfile", "neuron_dockerfile", "base_image"):
            if context.get(key) not in (None, ""):
                values[key] = str(context[key])
        if context.get("only") not in (None, ""):
            values["only"] = _names(context["only"])
        if context.get("model_data") not in (None, ""):
            values["model_data"] = _mapping(context["model_data"])
        for key in ("cfn_validate", "allow_emulated"):
            if key in context:
                values[key] = _flag(key, context[key])
        return cls(**values)


def has_packages(folder: Path) -> bool:
    """Whether `folder` holds packaged models (<variant>/model.tar.gz)."""
    return folder.is_dir() and any(folder.glob("*/model.tar.gz"))


def default_model_dir(user: Path = DEFAULT_MODEL_DIR, demo: Path = DEMO_MODEL_DIR) -> tuple[Path, tuple[str, ...]]:
    """(model_dir, notes): build/models when it holds packaged models, else the demo's when `make demo` built them
    (said in a note), else build/models (the targets then say what is missing)."""
    if has_packages(user) or not has_packages(demo):
        return user, ()
    return demo, (
        f"{user} holds no packaged model: using the demo's ({demo} -> {demo.resolve()}); "
        "`sagebox build --out build/models` packages yours",
    )


def _names(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if not names:
        raise InfraError("context 'only' names no target")
    return names


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise InfraError(f"context {key!r} must be true or false, got {value!r}")


def _mapping(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    text = str(value).strip()
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InfraError(f"context 'model_data' is not valid JSON: {exc.msg}") from None
        if not isinstance(decoded, dict):
            raise InfraError("context 'model_data' must be a JSON object")
        return {str(k): str(v) for k, v in decoded.items()}
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, uri = item.partition("=")
        if not sep or not name.strip() or not uri.strip():
            raise InfraError(f"context 'model_data' entry {item!r} is not target=uri")
        pairs[name.strip()] = uri.strip()
    return pairs
