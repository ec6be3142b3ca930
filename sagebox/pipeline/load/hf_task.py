"""What a Hugging Face model folder is for: its task, labels and pooling, read from the folder itself.

The task comes from the architecture config.json declares (`*ForQuestionAnswering`, `*ForSequenceClassification`,
`*ForTokenClassification`; `*ForCausalLM` and `*LMHeadModel`, as GPT-2's, are decoder LLMs: text-generation) or, for
an encoder without a task head, from sentence-transformers' files (`modules.json`: a sentence-embedding model);
`--task` may force it. A head the folder does not have is never made up: forcing classification on a
question-answering folder (or on a bare encoder) would serve an untrained head, so it is refused in one line. Any
encoder can embed text, so `feature-extraction` may be forced on any encoder folder; a causal LM is built for
text-generation only, and only for the model types the serving engine runs (neuron_emu/llm/config.py). A GGUF
file is a causal LM too: its config comes from the file's metadata, read by transformers.

sentence-transformers layout (https://sbert.net, `modules.json`): the Transformer module (the Hugging Face model, at
the folder's root or in a subfolder), then Pooling (`1_Pooling/config.json`: which of CLS / max / mean /
mean-sqrt-len pooling, concatenated in that order), optionally Dense layers (`2_Dense/config.json` + weights) and
Normalize. Without `modules.json` an encoder is mean-pooled (the usual reading of a plain encoder), unnormalised.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from container.manifest import TASKS, PoolingMode, PoolingSpec, ProblemType, Task
from neuron_emu.llm.config import FAMILIES, DecoderConfig, UnsupportedModel, read_config
from sagebox.errors import SageboxError
from sagebox.pipeline.load.sources import is_gguf_file

# Encoder families whose heads, tokenizers and layouts Sagebox exports and serves.
SUPPORTED_MODEL_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "electra", "albert", "mobilebert", "camembert")
WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)
HEAD_TASKS: dict[str, Task] = {
    "ForQuestionAnswering": "question-answering",
    "ForSequenceClassification": "text-classification",
    "ForTokenClassification": "token-classification",
    "ForCausalLM": "text-generation",
    "LMHeadModel": "text-generation",  # GPT2LMHeadModel
}
# A decoder's context must hold a prompt and its answer (GenerationSpec.context_length).
MIN_CONTEXT = 16
# sentence-transformers' Pooling config keys, in the order its forward concatenates them.
POOLING_KEYS: dict[str, PoolingMode] = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}
UNSUPPORTED_POOLING = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
# Dense activations sentence-transformers records by class path, and what PyTorch calls them.
ACTIVATIONS = {
    "torch.nn.modules.activation.Tanh": "tanh",
    "torch.nn.modules.linear.Identity": "identity",
    "torch.nn.modules.activation.ReLU": "relu",
    "torch.nn.modules.activation.GELU": "gelu",
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
}
ST_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")


@dataclass(frozen=True)
class DenseLayer:
    """A sentence-transformers Dense module: Linear(in_features, out_features) then an activation."""

    folder: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str


@dataclass(frozen=True)
class TaskInfo:
    task: Task
    architecture: str
    config: dict[str, Any]
    # The Hugging Face model's own folder (a sentence-transformers folder may keep it in a subfolder), or a GGUF file.
    model_dir: Path
    max_length: int  # the most tokens the model takes (sequence buckets stop there; a decoder's context length)
    labels: tuple[str, ...] | None = None
    problem_type: ProblemType | None = None
    pooling: PoolingSpec | None = None
    dense: tuple[DenseLayer, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type"))


def read_json(path: Path, what: str = "") -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SageboxError(f"{path} is missing{what}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SageboxError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SageboxError(f"{path} must hold a JSON object")
    return data


def check_model_folder(model_dir: Path) -> dict[str, Any]:
    """The Hugging Face model folder's config.json, after checking the files an export needs are there."""
    if not model_dir.is_dir():
        raise SageboxError(f"model folder {model_dir} does not exist")
    if not (model_dir / "config.json").is_file():
        raise SageboxError(f"{model_dir} has no config.json: not a Hugging Face model folder")
    config = read_json(model_dir / "config.json")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise SageboxError(
            f"unsupported architecture {model_type!r} in {model_dir / 'config.json'}: Sagebox exports "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} encoders"
        )
    if not any((model_dir / name).is_file() for name in WEIGHT_FILES):
        raise SageboxError(f"{model_dir} has no weights ({' or '.join(WEIGHT_FILES[:2])})")
    return config


def tokenizer_file(folder: Path, model_dir: Path) -> Path:
    """The fast tokenizer file (the sentence-transformers folder's or its Transformer subfolder's)."""
    for candidate in (model_dir / "tokenizer.json", folder / "tokenizer.json"):
        if candidate.is_file():
            return candidate
    raise SageboxError(f"{model_dir} has no tokenizer.json (a fast tokenizer file is required)")


def head_task(architecture: str) -> Task | None:
    return next((task for suffix, task in HEAD_TASKS.items() if architecture.endswith(suffix)), None)


def _architecture(config: dict[str, Any]) -> str:
    architectures = config.get("architectures") or []
    return str(architectures[0]) if architectures else str(config.get("model_type"))


def is_causal_lm(config: dict[str, Any]) -> bool:
    """Whether a config.json describes a decoder LLM: a causal LM head, or no architecture but a decoder model type."""
    if config.get("architectures"):
        return head_task(_architecture(config)) == "text-generation"
    return config.get("model_type") in FAMILIES


def decoder_shape(config: dict[str, Any], where: str) -> DecoderConfig:
    """The serving engine's reading of a causal LM's config (neuron_emu/llm/config.py). A model it cannot run
    (another model type, another RoPE, another activation) is refused in one line that names `where`."""
    try:
        shape = read_config(config)
    except UnsupportedModel as exc:
        raise SageboxError(f"{where}: {exc}: the text-generation engine cannot serve it") from None
    if shape.max_positions < MIN_CONTEXT:
        raise SageboxError(f"{where}: a context of {shape.max_positions} tokens is too short to generate text")
    return shape


def detect_task(folder: Path, forced: str | None = None) -> TaskInfo:
    """The folder's (or GGUF file's) task (or `forced`), checked against what the folder holds."""
    if forced is not None and forced not in TASKS:
        raise SageboxError(f"unknown task {forced!r}: choose one of {', '.join(TASKS)}")
    if is_gguf_file(folder):
        return _gguf_task(folder, forced)
    modules = _st_modules(folder)
    model_dir = folder / modules.get("Transformer", "") if modules else folder
    config_path = model_dir / "config.json"
    if config_path.is_file() and (forced == "text-generation" or is_causal_lm(read_json(config_path))):
        return _text_generation_task(folder, model_dir, forced)
    config = check_model_folder(model_dir)
    tokenizer_file(folder, model_dir)
    architecture = _architecture(config)
    has_head = head_task(architecture)
    natural: Task = has_head or "feature-extraction"
    task: Task = forced or natural  # type: ignore[assignment,unused-ignore]  # checked against TASKS above
    notes: list[str] = []
    if task != natural:
        if task != "feature-extraction":
            what = f"a {has_head} model" if has_head else "an encoder without a task head"
            raise SageboxError(
                f"{folder} holds {architecture} ({what}); --task {task} would serve an untrained {task} head: "
                f"use a model fine-tuned for {task}" + (" (or --task feature-extraction)" if not has_head else "")
            )
        notes.append(f"{architecture}'s {has_head} head is not used: the encoder's pooled states are the embeddings")
    max_length = _max_length(folder, model_dir, config)
    if task in ("text-classification", "token-classification"):
        labels = _labels(config, model_dir)
        problem = None
        if task == "text-classification":
            problem = _problem_type(config)
        return TaskInfo(task, architecture, config, model_dir, max_length, labels, problem, notes=tuple(notes))
    if task == "feature-extraction":
        pooling, dense = _pooling(folder, modules, config, model_dir)
        return TaskInfo(
            task, architecture, config, model_dir, max_length, pooling=pooling, dense=dense, notes=tuple(notes)
        )
    return TaskInfo(task, architecture, config, model_dir, max_length, notes=tuple(notes))


def _text_generation_task(folder: Path, model_dir: Path, forced: str | None) -> TaskInfo:
    """A causal LM folder's TaskInfo (no labels, no pooling; max_length is the context), or one line saying why the
    folder and the task do not go together."""
    config_path = model_dir / "config.json"
    config = read_json(config_path)
    architecture = _architecture(config)
    if not is_causal_lm(config):
        has_head = head_task(architecture)
        what = f"a {has_head} model" if has_head else "an encoder without a task head"
        raise SageboxError(
            f"{folder} holds {architecture} ({what}), not a causal LM: --task text-generation needs a decoder LLM "
            "(*ForCausalLM)"
        )
    _check_causal_task(folder, architecture, forced)
    shape = decoder_shape(config, str(config_path))
    if not any((model_dir / name).is_file() for name in WEIGHT_FILES):
        raise SageboxError(f"{model_dir} has no weights ({' or '.join(WEIGHT_FILES[:2])})")
    return TaskInfo("text-generation", architecture, config, model_dir, shape.max_positions)


def _check_causal_task(where: Path, architecture: str, forced: str | None) -> None:
    if forced not in (None, "text-generation"):
        raise SageboxError(
            f"{where} holds {architecture} (a decoder LLM): it is built for text-generation only, not --task {forced}"
        )


def _gguf_task(path: Path, forced: str | None) -> TaskInfo:
    """A GGUF file's TaskInfo: always a causal LM, its config read from the file's metadata by transformers."""
    config = gguf_config(path)
    model_type = str(config.get("model_type"))
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    architecture = str(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, model_type))
    _check_causal_task(path, architecture, forced)
    shape = decoder_shape(config, str(path))
    return TaskInfo("text-generation", architecture, config, path, shape.max_positions)


def gguf_config(path: Path) -> dict[str, Any]:
    """The transformers config a GGUF file's metadata describes, as a config.json dict (its `_name_or_path`, the
    file's folder, left out: the file names the model)."""
    from transformers.utils import is_gguf_available

    if not is_gguf_available():
        raise SageboxError(f"{path} is a GGUF file: reading it needs the gguf package (pip install 'sagebox[build]')")
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True).to_dict()
    except Exception as exc:  # the gguf reader and transformers raise their own types for a file they cannot read
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SageboxError(f"cannot read the GGUF file {path}: {first}") from None
    config.pop("_name_or_path", None)
    return dict(config)


def _labels(config: dict[str, Any], model_dir: Path) -> tuple[str, ...]:
    raw = config.get("id2label")
    count = config.get("num_labels")
    if isinstance(raw, dict) and raw:
        try:
            by_id = {int(key): str(value) for key, value in raw.items()}
        except (TypeError, ValueError):
            raise SageboxError(f"{model_dir / 'config.json'}: id2label keys must be label ids (integers)") from None
        if sorted(by_id) != list(range(len(by_id))):
            raise SageboxError(f"{model_dir / 'config.json'}: id2label must number the labels 0..{len(by_id) - 1}")
        return tuple(by_id[i] for i in range(len(by_id)))
    if isinstance(count, int) and count > 0:
        return tuple(f"LABEL_{i}" for i in range(count))
    raise SageboxError(f"{model_dir / 'config.json'} records no labels (id2label or num_labels)")


def _problem_type(config: dict[str, Any]) -> ProblemType:
    raw = config.get("problem_type")
    if raw is None:
        return "single_label_classification"
    if raw not in get_args(ProblemType):
        raise SageboxError(f"config.json problem_type {raw!r} is not one of {', '.join(get_args(ProblemType))}")
    return raw  # type: ignore[no-any-return,unused-ignore]


def _max_length(folder: Path, model_dir: Path, config: dict[str, Any]) -> int:
    """The most tokens the model takes: sentence-transformers' max_seq_length, else the tokenizer's
    model_max_length, capped by the position embeddings (RoBERTa-style models start positions after the pad id)."""
    positions = int(config.get("max_position_embeddings", 512) or 512)
    if config.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        positions -= int(config.get("pad_token_id", 1) or 1) + 1
    limit = positions
    for path, key in (
        (folder / "sentence_bert_config.json", "max_seq_length"),
        (model_dir / "tokenizer_config.json", "model_max_length"),
    ):
        if path.is_file():
            value = read_json(path).get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 8 <= value < limit:
                limit = value
                break
    return limit


def _st_modules(folder: Path) -> dict[str, str]:
    """sentence-transformers modules by kind -> path ("" is the folder itself); {} without modules.json."""
    path = folder / "modules.json"
    if not path.is_file():
        return {}
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SageboxError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(entries, list):
        raise SageboxError(f"{path} must hold a list of modules")
    found: dict[str, str] = {}
    for entry in sorted(entries, key=lambda e: e.get("idx", 0) if isinstance(e, dict) else 0):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise SageboxError(f"{path}: every module needs a 'type'")
        kind = entry["type"].rsplit(".", 1)[-1]
        if kind not in ST_MODULES:
            raise SageboxError(
                f"{path}: sentence-transformers module {entry['type']} is not supported "
                f"(Sagebox serves {', '.join(ST_MODULES)})"
            )
        if kind == "Dense":
            found[f"Dense:{len([k for k in found if k.startswith('Dense')])}"] = str(entry.get("path", ""))
        else:
            found[kind] = str(entry.get("path", ""))
    if "Transformer" not in found:
        raise SageboxError(f"{path} has no Transformer module")
    return found


def _pooling(
    folder: Path, modules: dict[str, str], config: dict[str, Any], model_dir: Path
) -> tuple[PoolingSpec, tuple[DenseLayer, ...]]:
    hidden = int(config.get("hidden_size", config.get("dim", 0)) or 0)
    st_config = folder / "sentence_bert_config.json"
    lowercase = bool(read_json(st_config).get("do_lower_case", False)) if modules and st_config.is_file() else False
    if "Pooling" not in modules:
        source = (
            "default: mean pooling, no normalisation (no sentence-transformers modules.json)"
            if not modules
            else ("modules.json without Pooling: mean pooling")
        )
        return PoolingSpec(modes=["mean"], normalize=False, dimension=hidden, lowercase=lowercase, source=source), ()
    pooling_config = read_json(folder / modules["Pooling"] / "config.json")
    unsupported = [key for key in UNSUPPORTED_POOLING if pooling_config.get(key)]
    if unsupported:
        raise SageboxError(f"{folder / modules['Pooling']}: pooling {', '.join(unsupported)} is not supported")
    modes = [mode for key, mode in POOLING_KEYS.items() if pooling_config.get(key)]
    if not modes:
        raise SageboxError(f"{folder / modules['Pooling'] / 'config.json'} enables no pooling mode")
    dimension = hidden * len(modes)
    dense: list[DenseLayer] = []
    for key in sorted(k for k in modules if k.startswith("Dense:")):
        layer_dir = folder / modules[key]
        layer = read_json(layer_dir / "config.json")
        activation = ACTIVATIONS.get(str(layer.get("activation_function")))
        if activation is None:
            raise SageboxError(
                f"{layer_dir / 'config.json'}: activation {layer.get('activation_function')!r} is not supported "
                f"({', '.join(a.rsplit('.', 1)[-1] for a in ACTIVATIONS)})"
            )
        in_features, out_features = int(layer.get("in_features", 0)), int(layer.get("out_features", 0))
        if in_features != dimension or out_features < 1:
            raise SageboxError(f"{layer_dir / 'config.json'}: in_features {in_features} != pooled size {dimension}")
        dense.append(DenseLayer(layer_dir, in_features, out_features, bool(layer.get("bias", True)), activation))
        dimension = out_features
    spec = PoolingSpec(
        modes=modes,
        normalize="Normalize" in modules,
        dimension=dimension,
        dense_layers=len(dense),
        lowercase=lowercase,
        source="modules.json",
    )
    return spec, tuple(dense)
