"""FP32 export of a task module: TorchScript (trace + freeze) or ONNX, both with dynamic batch and sequence."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from sagebox.pipeline.load.hf_model import OUTPUT_NAMES, SEQUENCE_OUTPUT_DIMS, TaskModule

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def example_inputs(batch: int, seq: int, vocab_size: int = 1000) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Deterministic example tensors; the attention mask is all ones (tracing with padding is not needed)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab_size, (batch, seq), generator=generator, dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2 :] = 1
    return ids, mask, types


def to_torchscript(module: torch.nn.Module, out_path: Path, seq: int = 128) -> None:
    """Trace and freeze `module` (FP32 or dynamically quantized) and save it to `out_path`."""
    module = module.eval()
    inputs = example_inputs(1, seq)
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, inputs, strict=False, check_trace=False)
        frozen = torch.jit.freeze(traced.eval())
    torch.jit.save(frozen, str(out_path))


def to_onnx(module: TaskModule, out_path: Path, seq: int = 128, opset: int = 17) -> None:
    """Export with dynamic batch/sequence axes through the TorchScript-based exporter (keeps ORT fusions)."""
    module = module.eval()
    outputs = OUTPUT_NAMES[module.task]
    axes: dict[str, dict[int, str]] = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    for name, seq_dim in zip(outputs, SEQUENCE_OUTPUT_DIMS[module.task], strict=True):
        axes[name] = {0: "batch"} if seq_dim is None else {0: "batch", seq_dim: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            example_inputs(1, seq),
            str(out_path),
            input_names=list(INPUT_NAMES),
            output_names=list(outputs),
            dynamic_axes=axes,
            opset_version=opset,
            dynamo=False,
        )


# Model types whose encoder blocks onnxruntime.transformers fuses with its "bert" rules.
FUSABLE_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "distilbert")


def fuse_onnx(path: Path, config: dict[str, object]) -> dict[str, int]:
    """Rewrite `path` in place with ONNX Runtime's transformer fusions (Attention, EmbedLayerNorm, BiasGelu...).

    Offline Python fusions only (opt_level 0): the file stays portable across CPUs. Residual adds stay apart from
    their layer norms: ONNX Runtime's SkipLayerNormalization CPU kernel is the slower form (see
    container/handlers/onnx.py). Returns fused-op counts.
    """
    import logging

    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    if config.get("model_type") not in FUSABLE_MODEL_TYPES:
        return {}
    # DistilBERT's config spells them n_heads and dim.
    heads = int(config.get("num_attention_heads", config.get("n_heads", 0)) or 0)  # type: ignore[call-overload]
    hidden = int(config.get("hidden_size", config.get("dim", 0)) or 0)  # type: ignore[call-overload]
    if heads <= 0 or hidden <= 0 or hidden % heads:
        return {}
    quiet = logging.getLogger("onnxruntime.transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fusions = FusionOptions("bert")
            fusions.enable_skip_layer_norm = False
            model = optimize_model(
                str(path),
                model_type="bert",
                num_heads=heads,
                hidden_size=hidden,
                opt_level=0,
                optimization_options=fusions,
            )
            counts = {op: n for op, n in model.get_fused_operator_statistics().items() if n}
            if counts.get("Attention", 0) == 0:
                return {}
            model.save_model_to_file(str(path))
    finally:
        quiet.setLevel(level)
    return counts
