"""`manifest.json`: what a model directory holds, and the check that it holds exactly that."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, get_args

from container.cpu_kind import CPU_KINDS, RUNTIME_VARIABLE, Decision
from container.errors import ContainerError
from container.record import Invalid, Record, ValidationError, constrained

MANIFEST_NAME = "manifest.json"
# 2: the task-specific fields (labels, problem_type, pooling) and the source origin/revision; 1 still reads.
SCHEMA_VERSION = 2

Variant = Literal["fp32", "int8", "neuron"]
VARIANTS: tuple[Variant, ...] = get_args(Variant)
# "torch": PyTorch eager from safetensors weights (the text-generation engine, container/generation/). A decoder
# compiled for NeuronCores is variant and runtime "neuron" (container/generation/neuron.py).
# "openvino": an OpenVINO IR (model.xml + model.bin), INT8 by NNCF (container/handlers/openvino.py).
Runtime = Literal["torchscript", "onnxruntime", "neuron", "torch", "openvino"]
# The tasks served, named as the Hugging Face pipelines that answer the same requests.
Task = Literal[
    "question-answering", "text-classification", "token-classification", "feature-extraction", "text-generation"
]
TASKS: tuple[Task, ...] = get_args(Task)
# What manifests of schema 1 called question answering (every model was extractive QA then).
LEGACY_TASK_NAMES = {"extractive-qa": "question-answering"}
ProblemType = Literal["single_label_classification", "multi_label_classification", "regression"]
PoolingMode = Literal["cls", "max", "mean", "mean_sqrt_len"]
POOLING_MODES: tuple[PoolingMode, ...] = get_args(PoolingMode)


class ManifestError(ContainerError, ValueError):
    """A model directory whose manifest is missing, malformed, or disagrees with the files."""


@dataclass(frozen=True, kw_only=True)
class TokenizerSpec(Record):
    file: str = "tokenizer.json"
    max_length: int = constrained(384, ge=8, le=1 << 20)  # encoders' longest window; a decoder's context


@dataclass(frozen=True, kw_only=True)
class QuantizationSpec(Record):
    backend: Literal["torch", "onnxruntime", "openvino"]
    mode: Literal["static", "dynamic"]
    per_channel: bool
    calibration_batches: int = constrained(ge=0)
    weight_dtype: str = "int8"
    reduce_range: bool = False
    # ONNX Runtime graph form: "qdq" (QuantizeLinear/DequantizeLinear pairs) or "qoperator" (integer ops).
    format: Literal["qdq", "qoperator"] | None = None
    # torch.backends.quantized.engine the weights were packed for; the TorchScript handler selects it at load.
    engine: str | None = None
    calibration_method: str | None = None
    # Op types the quantizer left in FP32 (accuracy-driven fallback).
    fp32_op_types: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class CompileSpec(Record):
    # What compiled the graph: Sagebox's NeuronCore emulator (TorchScript on a CPU), or AWS's torch-neuronx
    # (a NEFF that only runs on NeuronCores).
    backend: Literal["neuron_emu", "torch_neuronx"] = "neuron_emu"
    compiler: str
    auto_cast: str
    auto_cast_type: str
    target_instances: list[str] = field(default_factory=list)
    custom_op_libraries: list[str] = field(default_factory=list)
    # NeuronCores one model replica is sharded over (Megatron-style tensor parallelism, neuron_emu.parallel); 1 is
    # the single-core graph. Above 1 an encoder's graphs are one neuron_emu.parallel directory per sequence bucket; a
    # decoder's ranks are in its compiled decoder directory (neuron_emu.llm).
    tensor_parallel: int = constrained(1, ge=1, le=64)
    # The model's attention heads: a degree must divide them (checked at compile and again at synth).
    num_attention_heads: int | None = constrained(None, ge=1)
    # A decoder LLM's batch lines, fixed at compile (its key/value cache holds that many sequences); None for the
    # encoders, whose graphs batch dynamically.
    batch_size: int | None = constrained(None, ge=1, le=1024)

    def _check(self) -> None:
        if self.tensor_parallel > 1 and self.backend != "neuron_emu":
            raise ValueError(f"tensor_parallel {self.tensor_parallel} is only served for neuron_emu models")
        heads = self.num_attention_heads
        if heads is not None and heads % self.tensor_parallel:
            raise ValueError(f"tensor_parallel {self.tensor_parallel} does not divide the {heads} attention heads")


@dataclass(frozen=True, kw_only=True)
class SourceSpec(Record):
    name: str
    architecture: str
    license: str = "unknown"
    # Where the weights came from: a local folder, or the Hugging Face Hub (`name` is then the repo id and
    # `revision` the commit the build resolved and pinned).
    origin: Literal["folder", "hub"] = "folder"
    revision: str | None = None


@dataclass(frozen=True, kw_only=True)
class PoolingSpec(Record):
    """How a feature-extraction model turns token states into one sentence embedding (sentence-transformers'
    Pooling, Dense and Normalize modules). Pooling and dense layers are in the graph; normalisation is applied by the
    server (a request may turn it off)."""

    # Concatenated in this order, as sentence-transformers' Pooling concatenates its modes.
    modes: list[PoolingMode] = constrained(min_length=1)
    normalize: bool
    dimension: int = constrained(ge=1)
    dense_layers: int = constrained(0, ge=0)
    # sentence_bert_config.json's do_lower_case: the text is lower-cased before tokenizing.
    lowercase: bool = False
    # Where the settings came from ("modules.json" / "default: mean pooling, no normalisation").
    source: str = "modules.json"

    def _check(self) -> None:
        if len(set(self.modes)) != len(self.modes):
            raise Invalid("modes", "pooling modes must not repeat")


@dataclass(frozen=True, kw_only=True)
class GenerationSpec(Record):
    """A decoder LLM: what the generation engine needs beyond its weights (container/generation/)."""

    architecture: str  # config.json's model_type: llama, mistral, qwen2, gpt2, opt
    config_file: str = "config.json"
    context_length: int = constrained(ge=16)  # prompt plus generated tokens, at most
    eos_token_ids: list[int] = constrained(min_length=1)
    bos_token_id: int | None = None
    # The tokenizer's chat template (Jinja) as a file of the directory; None: the Messages API is refused.
    chat_template: str | None = None
    # Prompts given as text are tokenized with the tokenizer's special tokens (Llama's BOS), as transformers does.
    add_special_tokens: bool = True


@dataclass(frozen=True, kw_only=True)
class RuntimeBuild(Record):
    """Another build of the same model, for another runtime, in the same directory: the one a server loads on the
    CPU kinds listed (container/cpu_kind.py), measured faster there. Every other kind, and any CPU this build was
    not measured on, loads the manifest's own runtime and model_file: the fallback, which runs on every CPU."""

    runtime: Runtime
    model_file: str
    quantization: QuantizationSpec | None = None
    # Where this build is the one to load (may be empty: loaded only when SAGEBOX_RUNTIME pins it).
    cpu_kinds: list[str] = field(default_factory=list)
    # Why: the build machine's own measurement, or the table of measured preferences (infra/data/cpu_kinds.json).
    reason: str = ""

    def _check(self) -> None:
        if self.runtime in ("neuron", "torch"):
            raise Invalid("runtime", f"a {self.runtime} model is not an alternative build for a CPU kind")
        unknown = sorted(set(self.cpu_kinds) - set(CPU_KINDS))
        if unknown:
            raise Invalid("cpu_kinds", f"unknown CPU kind(s) {unknown}: choose from {', '.join(CPU_KINDS)}")


@dataclass(frozen=True, kw_only=True)
class Manifest(Record):
    schema_version: int = SCHEMA_VERSION
    tool_version: str
    task: Task = "question-answering"
    variant: Variant
    runtime: Runtime
    model_file: str
    tokenizer: TokenizerSpec
    sequence_buckets: list[int]
    source: SourceSpec
    quantization: QuantizationSpec | None = None
    compile: CompileSpec | None = None
    # Classification and token classification: the label of each output index (config.json's id2label, in id order).
    labels: list[str] | None = None
    # Classification only: how scores come from logits (softmax, sigmoid per label, or none).
    problem_type: ProblemType | None = None
    # Feature extraction only.
    pooling: PoolingSpec | None = None
    # Text generation only.
    generation: GenerationSpec | None = None
    # Builds for other runtimes, each the one to load on the CPU kinds it names (the fields above are the fallback).
    alternatives: list[RuntimeBuild] = field(default_factory=list)
    files: dict[str, str]

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        task = data.get("task")
        if isinstance(task, str):
            data["task"] = LEGACY_TASK_NAMES.get(task, task)
        return data

    def _check(self) -> None:
        self._check_fields()
        if self.sequence_buckets[-1] > self.tokenizer.max_length:
            raise ValueError("the largest sequence bucket exceeds the tokenizer max_length")
        for needed in (self.model_file, self.tokenizer.file):
            if needed not in self.files:
                raise ValueError(f"{needed!r} is not listed in files")
        if self.variant == "int8" and self.quantization is None:
            raise ValueError("an int8 variant must record its quantization")
        self._check_alternatives()
        if (self.variant == "neuron") != (self.runtime == "neuron"):
            raise ValueError("the neuron variant and the neuron runtime go together")
        self._check_task()

    def _check_fields(self) -> None:
        version = self.schema_version
        if not 1 <= version <= SCHEMA_VERSION:
            raise Invalid(
                "schema_version",
                f"schema {version} is not one this server reads (1 to {SCHEMA_VERSION}): rebuild the model",
            )
        buckets = self.sequence_buckets
        if not buckets:
            raise Invalid("sequence_buckets", "at least one sequence bucket is required")
        if any(b < 8 for b in buckets) or sorted(set(buckets)) != buckets:
            raise Invalid("sequence_buckets", "sequence buckets must be strictly increasing integers >= 8")
        for name, digest in self.files.items():
            try:
                _check_relative(name)
            except ValueError as exc:
                raise Invalid("files", str(exc)) from None
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise Invalid("files", f"sha256 of {name!r} is not 64 lowercase hex digits")

    def _check_task(self) -> None:
        """Each task's fields are present, and only its own: a server never guesses what a model outputs."""
        labelled = self.task in ("text-classification", "token-classification")
        if labelled and not self.labels:
            raise ValueError(f"a {self.task} model must record its labels")
        if not labelled and self.labels is not None:
            raise ValueError(f"a {self.task} model has no labels")
        if (self.task == "text-classification") != (self.problem_type is not None):
            raise ValueError("problem_type is recorded for (and only for) a text-classification model")
        if (self.task == "feature-extraction") != (self.pooling is not None):
            raise ValueError("pooling is recorded for (and only for) a feature-extraction model")
        if (self.task == "text-generation") != (self.generation is not None):
            raise ValueError("generation is recorded for (and only for) a text-generation model")
        if self.runtime == "torch" and self.task != "text-generation":
            raise ValueError("the torch runtime serves text-generation models only")
        if self.task == "text-generation" and self.runtime not in ("torch", "neuron"):
            raise ValueError("a text-generation model runs on the torch runtime, or compiled for NeuronCores")
        if self.task == "text-generation" and self.runtime == "neuron":
            compiled = self.compile
            if compiled is None or compiled.batch_size is None:
                raise ValueError("a text-generation model compiled for NeuronCores must record its compile batch_size")
            if self.generation is not None and self.generation.context_length != self.tokenizer.max_length:
                raise ValueError("a compiled decoder's context_length is its max length (tokenizer.max_length)")
        spec = self.generation
        if spec is not None:
            for needed in (spec.config_file, spec.chat_template):
                if needed is not None and needed not in self.files:
                    raise ValueError(f"{needed!r} is not listed in files")

    def _check_alternatives(self) -> None:
        claimed: set[str] = set()
        for build in self.alternatives:
            if build.model_file not in self.files:
                raise ValueError(f"{build.model_file!r} is not listed in files")
            if build.runtime == self.runtime:
                raise ValueError(f"an alternative build must use another runtime than {self.runtime}")
            if self.variant == "int8" and build.quantization is None:
                raise ValueError("an int8 variant's alternative build must record its quantization")
            twice = claimed & set(build.cpu_kinds)
            if twice:
                raise ValueError(f"CPU kind(s) {sorted(twice)} are claimed by two alternative builds")
            claimed |= set(build.cpu_kinds)
        if len({b.runtime for b in self.alternatives}) != len(self.alternatives):
            raise ValueError("two alternative builds use the same runtime")

    def runtimes(self) -> list[str]:
        """Every runtime this directory can be loaded with, the fallback first."""
        return [self.runtime, *(b.runtime for b in self.alternatives)]

    def for_cpu(self, cpu_kind: str, pinned: str = "auto") -> tuple[Manifest, Decision]:
        """The manifest as the chosen build's loader sees it (its runtime, model file and quantization; no
        alternatives left), and the decision: the build `pinned` names, else the one listing `cpu_kind`, else the
        fallback. Pinning a runtime the directory has no build for raises ValueError."""
        pinned = pinned.strip().lower() or "auto"
        if pinned not in ("auto", *self.runtimes()):
            raise ValueError(
                f"{RUNTIME_VARIABLE}={pinned} but this model has no {pinned} build (it has: "
                f"{', '.join(self.runtimes())})"
            )
        if pinned == self.runtime:
            return self._only(), Decision(self.runtime, self.model_file, cpu_kind, f"pinned by {RUNTIME_VARIABLE}")
        for build in self.alternatives:
            if pinned == build.runtime:
                reason = f"pinned by {RUNTIME_VARIABLE}"
            elif pinned == "auto" and cpu_kind in build.cpu_kinds:
                reason = build.reason or f"the build chosen for {cpu_kind}"
            else:
                continue
            chosen = dataclasses.replace(
                self,
                runtime=build.runtime,
                model_file=build.model_file,
                quantization=build.quantization,
                alternatives=[],
            )
            return chosen, Decision(build.runtime, build.model_file, cpu_kind, reason)
        reason = "the only build" if not self.alternatives else f"the fallback: no build is chosen for {cpu_kind}"
        return self._only(), Decision(self.runtime, self.model_file, cpu_kind, reason)

    def _only(self) -> Manifest:
        return dataclasses.replace(self, alternatives=[]) if self.alternatives else self

    def to_json(self) -> str:
        """Canonical text: sorted keys, so the same manifest is always the same bytes (no `alternatives` key when
        there are none: a single-build directory reads as it did before alternatives existed)."""
        data = self.model_dump(mode="json")
        if not data["alternatives"]:
            del data["alternatives"]
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _check_relative(name: str) -> None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name != path.as_posix() or name in {"", "."}:
        raise ValueError(f"file name {name!r} must be a plain relative path inside the model directory")
    if name == MANIFEST_NAME:
        raise ValueError("the manifest cannot list itself")


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_names(model_dir: Path) -> list[str]:
    """Every regular file under `model_dir` except the top-level manifest, as sorted POSIX relative paths."""
    return sorted(
        path.relative_to(model_dir).as_posix()
        for path in model_dir.rglob("*")
        if path.is_file() and path.relative_to(model_dir).as_posix() != MANIFEST_NAME
    )


def hash_files(model_dir: Path) -> dict[str, str]:
    """sha256 of every regular file under `model_dir` except the manifest, keyed by POSIX relative path."""
    return {name: sha256_file(model_dir / name) for name in file_names(model_dir)}


def parse(text: str, where: str = MANIFEST_NAME) -> Manifest:
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ManifestError(f"{where} is invalid at {loc}: {first['msg']}") from None


def load_verified(model_dir: Path) -> Manifest:
    """Read `model_dir/manifest.json` and prove every listed file is present and unmodified."""
    manifest_path = model_dir / MANIFEST_NAME
    if not model_dir.is_dir():
        raise ManifestError(f"model directory {model_dir} does not exist")
    try:
        text = manifest_path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ManifestError(f"{manifest_path} is missing: not a Sagebox model directory") from None
    except OSError as exc:
        raise ManifestError(f"{manifest_path} cannot be read: {exc.strerror}") from None
    manifest = parse(text, str(manifest_path))
    missing = [name for name in manifest.files if not (model_dir / name).is_file()]
    if missing:
        raise ManifestError(f"model is incomplete: {', '.join(sorted(missing))} missing from {model_dir}")
    tampered = [name for name, digest in manifest.files.items() if sha256_file(model_dir / name) != digest]
    if tampered:
        raise ManifestError(f"model is tampered: sha256 mismatch for {', '.join(sorted(tampered))}")
    return manifest


def unlisted_files(model_dir: Path, manifest: Manifest) -> list[str]:
    """Files present in the directory that the manifest does not vouch for (they are never loaded)."""
    return sorted(set(file_names(model_dir)) - set(manifest.files))
