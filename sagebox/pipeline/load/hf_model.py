"""Load a Hugging Face model folder as a module with one fixed call signature per task:
`(input_ids, attention_mask, token_type_ids) -> outputs`, what every artifact (ONNX, TorchScript, Neuron) runs.

- question-answering: (start_logits [batch, seq], end_logits [batch, seq])
- text-classification: (logits [batch, labels],)
- token-classification: (logits [batch, seq, labels],)
- feature-extraction: (sentence_embedding [batch, dimension],): the encoder's last hidden states pooled (and passed
  through sentence-transformers Dense layers) in the graph; normalisation is the server's (a request may skip it).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from sagebox.errors import SageboxError
from sagebox.pipeline.load.hf_task import (
    SUPPORTED_MODEL_TYPES,
    DenseLayer,
    TaskInfo,
    check_model_folder,
    detect_task,
    read_json,
)

OUTPUT_NAMES: dict[str, tuple[str, ...]] = {
    "question-answering": ("start_logits", "end_logits"),
    "text-classification": ("logits",),
    "token-classification": ("logits",),
    "feature-extraction": ("sentence_embedding",),
}
# Which output dimensions follow the sequence length (ONNX dynamic axes, Neuron output trimming).
SEQUENCE_OUTPUT_DIMS: dict[str, tuple[int | None, ...]] = {
    "question-answering": (1, 1),
    "text-classification": (None,),
    "token-classification": (1,),
    "feature-extraction": (None,),
}
MASK_FILL = -1e9  # sentence-transformers' max pooling sets padded positions to this before taking the max


class TaskModule(nn.Module):
    """A Hugging Face model behind the fixed signature; `uses_token_types` says whether token_type_ids reach it."""

    task = ""

    def __init__(self, model: nn.Module, uses_token_types: bool) -> None:
        super().__init__()
        self.model = model
        self.uses_token_types = uses_token_types

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> tuple:
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.uses_token_types:
            kwargs["token_type_ids"] = token_type_ids
        return tuple(self.model(**kwargs, return_dict=False))


class QAModule(TaskModule):
    """(input_ids, attention_mask, token_type_ids) -> (start_logits, end_logits)."""

    task = "question-answering"

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.encode(input_ids, attention_mask, token_type_ids)
        return out[0], out[1]


class LogitsModule(TaskModule):
    """(input_ids, attention_mask, token_type_ids) -> (logits,) of a classification or token-classification head."""

    def __init__(self, model: nn.Module, uses_token_types: bool, task: str) -> None:
        super().__init__(model, uses_token_types)
        self.task = task

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor]:
        return (self.encode(input_ids, attention_mask, token_type_ids)[0],)


class Dense(nn.Module):
    """A sentence-transformers Dense module: linear, then activation."""

    def __init__(self, layer: DenseLayer) -> None:
        super().__init__()
        self.linear = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias)
        self.activation = {
            "tanh": nn.Tanh(),
            "identity": nn.Identity(),
            "relu": nn.ReLU(),
            "gelu": nn.GELU(),
            "sigmoid": nn.Sigmoid(),
        }[layer.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.activation(self.linear(x))
        return out


class EmbeddingModule(TaskModule):
    """(input_ids, attention_mask, token_type_ids) -> (sentence_embedding,): pooled last hidden states."""

    task = "feature-extraction"

    def __init__(self, model: nn.Module, uses_token_types: bool, modes: list[str], dense: list[Dense]) -> None:
        super().__init__(model, uses_token_types)
        self.modes = list(modes)
        self.dense = nn.ModuleList(dense)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor]:
        hidden = self.encode(input_ids, attention_mask, token_type_ids)[0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = []
        for mode in self.modes:
            if mode == "cls":
                pooled.append(hidden[:, 0])
            elif mode == "max":
                pooled.append(hidden.masked_fill(mask == 0, MASK_FILL).max(dim=1).values)
            else:
                total = (hidden * mask).sum(dim=1)
                count = mask.sum(dim=1).clamp(min=1e-9)
                pooled.append(total / (count if mode == "mean" else count.sqrt()))
        embedding = torch.cat(pooled, dim=-1) if len(pooled) > 1 else pooled[0]
        for layer in self.dense:
            embedding = layer(embedding)
        return (embedding,)


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def load_task_module(info: TaskInfo, attn_implementation: str = "eager") -> TaskModule:
    """The folder's model behind its task's signature, in eval mode. A task head must come with the folder's
    weights: one transformers would have to initialise at random is refused."""
    import transformers

    if info.task == "text-generation":
        raise SageboxError(
            f"{info.model_dir} holds a decoder LLM ({info.architecture}): text-generation models are built by "
            "`sagebox build --task text-generation` (FP32 and INT8), and compiled for NeuronCores from that build's "
            "FP32 directory (`sagebox compile --model-dir`)"
        )
    _quiet_transformers()
    auto = {
        "question-answering": transformers.AutoModelForQuestionAnswering,
        "text-classification": transformers.AutoModelForSequenceClassification,
        "token-classification": transformers.AutoModelForTokenClassification,
        "feature-extraction": transformers.AutoModel,
    }[info.task]
    folder = str(info.model_dir)
    try:
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
        model, loading = auto.from_pretrained(
            folder,
            config=config,
            local_files_only=True,
            attn_implementation=attn_implementation,
            output_loading_info=True,
        )
    except Exception as exc:  # transformers, safetensors and torch each raise their own types for a bad folder
        raise SageboxError(f"cannot load the model in {folder}: {_first_line(exc)}") from None
    # A classifier's pooler is part of its head: missing, it would start from random weights too. (Embeddings use
    # the last hidden states, never the pooler; QA and token-classification models have none.)
    missing = list(loading.get("missing_keys", []))
    if info.task != "feature-extraction" and missing:
        raise SageboxError(
            f"{folder}'s weights lack its {info.task} head ({', '.join(sorted(missing)[:3])}): transformers would "
            "start it from random weights"
        )
    uses_token_types = int(str(info.config.get("type_vocab_size") or 0)) > 1
    module: TaskModule
    if info.task == "question-answering":
        module = QAModule(model, uses_token_types)
    elif info.task == "feature-extraction":
        assert info.pooling is not None
        module = EmbeddingModule(model, uses_token_types, list(info.pooling.modes), [_dense(d) for d in info.dense])
    else:
        module = LogitsModule(model, uses_token_types, info.task)
    return module.eval()


def _dense(layer: DenseLayer) -> Dense:
    """A Dense module with its sentence-transformers weights (model.safetensors or pytorch_model.bin)."""
    dense = Dense(layer)
    state: dict[str, torch.Tensor]
    if (layer.folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(layer.folder / "model.safetensors"))
    elif (layer.folder / "pytorch_model.bin").is_file():
        state = torch.load(str(layer.folder / "pytorch_model.bin"), map_location="cpu", weights_only=True)
    else:
        raise SageboxError(f"{layer.folder} has no weights (model.safetensors or pytorch_model.bin)")
    try:
        dense.load_state_dict({k: v for k, v in state.items() if k.startswith("linear.")}, strict=True)
    except RuntimeError as exc:
        raise SageboxError(f"{layer.folder}: {_first_line(exc)}") from None
    return dense.eval()


def load_qa_module(model_dir: Path, attn_implementation: str = "eager") -> QAModule:
    """A question-answering folder's module (the folder must hold a QA head)."""
    module = load_task_module(detect_task(model_dir, "question-answering"), attn_implementation)
    assert isinstance(module, QAModule)
    return module


__all__ = [
    "OUTPUT_NAMES",
    "SEQUENCE_OUTPUT_DIMS",
    "SUPPORTED_MODEL_TYPES",
    "EmbeddingModule",
    "LogitsModule",
    "QAModule",
    "TaskModule",
    "check_model_folder",
    "load_qa_module",
    "load_task_module",
    "read_json",
]
