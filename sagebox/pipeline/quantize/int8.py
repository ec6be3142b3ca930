"""INT8 quantization of a task model: ONNX Runtime (dynamic / static QDQ), PyTorch (dynamic / static), or an
OpenVINO IR quantized by NNCF (static)."""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import shutil
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from container.handlers.base import ModelInputs
from container.manifest import Manifest, Runtime, load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.export import graph as export
from sagebox.pipeline.export.artifact import staged_dir, task_fields, write_manifest
from sagebox.pipeline.load.hf_model import TaskModule, load_task_module
from sagebox.pipeline.load.hf_task import detect_task
from sagebox.pipeline.quantize.calibration import as_torch_args
from sagebox.pipeline.quantize.options import (
    CALIBRATION_PERCENTILE,
    TORCH_ENGINE,
    QuantizeOptions,
)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """ONNX Runtime's quantizer logs advice through the root logger and prints calibration progress to stdout
    (which `--json` output must not contain); torch.ao warns it is deprecated."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def quantize_onnx_file(
    fp32_model: Path, out_model: Path, options: QuantizeOptions, calibration: Sequence[ModelInputs] = ()
) -> None:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    model = onnx.load(str(fp32_model))
    input_names = [i.name for i in model.graph.input]
    fused = any(node.domain == "com.microsoft" for node in model.graph.node)
    kept_fp32 = [node.name for node in model.graph.node if node.op_type in options.fp32_op_types]
    # A graph fused by onnxruntime.transformers has contrib ops whose output types the quantizer cannot infer.
    extra: dict[str, object] = {"DefaultTensorType": onnx.TensorProto.FLOAT} if fused else {}
    with _quiet():
        if options.mode == "dynamic":
            quantize_dynamic(
                model,
                out_model,
                per_channel=options.per_channel,
                reduce_range=options.reduce_range,
                weight_type=QuantType.QInt8,
                nodes_to_exclude=kept_fp32,
                extra_options=extra,
            )
            return
        if not calibration:
            raise SageboxError("static quantization needs calibration data")

        class FeedReader(CalibrationDataReader):
            """The calibration batches, restricted to the inputs the graph declares; `set_range` lets the
            calibrator take them one at a time (batches of different buckets cannot be stacked)."""

            def __init__(self) -> None:
                self._feeds = [{name: batch[name] for name in input_names} for batch in calibration]
                self._items = iter(self._feeds)

            def __len__(self) -> int:
                return len(self._feeds)

            def set_range(self, start_index: int, end_index: int) -> None:
                self._items = iter(self._feeds[start_index:end_index])

            def get_next(self) -> dict[str, np.ndarray] | None:
                return next(self._items, None)

        methods = {
            "minmax": CalibrationMethod.MinMax,
            "entropy": CalibrationMethod.Entropy,
            "percentile": CalibrationMethod.Percentile,
        }
        quantize_static(
            model,
            out_model,
            FeedReader(),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul", "Gather"],
            per_channel=options.per_channel,
            reduce_range=options.reduce_range,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=methods[options.method],
            nodes_to_exclude=kept_fp32,
            # Weight MatMuls only: quantizing the attention score MatMuls (activation x activation) costs
            # accuracy for little speed.
            extra_options={
                **extra,
                "WeightSymmetric": True,
                "MatMulConstBOnly": True,
                "CalibPercentile": CALIBRATION_PERCENTILE,
                # One batch per collection pass: histogram calibrators stack a pass's outputs into one array.
                "CalibStridedMinMax": 1,
            },
        )


def quantize_torch_module(
    module: TaskModule, options: QuantizeOptions, calibration: Sequence[ModelInputs] = ()
) -> TaskModule:
    """A quantized copy of `module`: every nn.Linear becomes INT8 (dynamic, or static: calibrated ranges)."""
    import torch
    from torch import nn
    from torch.ao import quantization as tq

    torch.backends.quantized.engine = TORCH_ENGINE
    module = copy.deepcopy(module).eval()
    with _quiet():
        if options.mode == "dynamic":
            qconfig = tq.per_channel_dynamic_qconfig if options.per_channel else tq.default_dynamic_qconfig
            quantized: TaskModule = tq.quantize_dynamic(module, {nn.Linear: qconfig}, dtype=torch.qint8)
            return quantized
        if not calibration:
            raise SageboxError("static quantization needs calibration data")
        weight = tq.default_per_channel_weight_observer if options.per_channel else tq.default_weight_observer
        observer = tq.HistogramObserver if options.method == "histogram" else tq.MinMaxObserver
        activation = observer.with_args(reduce_range=options.reduce_range)
        qconfig = tq.QConfig(activation=activation, weight=weight)
        _wrap_linears(module, qconfig)
        tq.prepare(module, inplace=True)
        with torch.no_grad():
            for batch in calibration:
                module(*as_torch_args(batch))
        tq.convert(module, inplace=True)
        return module


def quantize_openvino(
    module: TaskModule, out_model: Path, options: QuantizeOptions, calibration: Sequence[ModelInputs]
) -> None:
    """The module converted by OpenVINO's PyTorch frontend (scaled dot-product attention stays one op, which the CPU
    plugin runs as one kernel: 6 % faster at 384 tokens than the same model read from the exported ONNX graph,
    BERT-base dims, Intel Xeon Ice Lake), quantized by NNCF's transformer recipe (model_type TRANSFORMER, preset
    MIXED: symmetric weights, asymmetric activations; SmoothQuant; fast bias correction) on the calibration batches,
    saved as an IR (`out_model` .xml beside its .bin; weights NNCF left in floating point are stored as FP16)."""
    import nncf
    import openvino as ov
    import torch

    if not calibration:
        raise SageboxError("the openvino backend needs calibration data")
    example = as_torch_args(calibration[0])
    with _quiet(), torch.no_grad():
        model = ov.convert_model(module.eval(), example_input=example)
        names = [port.get_any_name() for port in model.inputs]
        dataset = nncf.Dataset(list(calibration), lambda batch: {name: batch[name] for name in names})
        quantized = nncf.quantize(
            model,
            dataset,
            model_type=nncf.ModelType.TRANSFORMER,
            preset=nncf.QuantizationPreset.MIXED,
            subset_size=len(calibration),
        )
        ov.save_model(quantized, str(out_model))


def _wrap_linears(module: object, qconfig: object) -> None:
    """Put every nn.Linear between a QuantStub and a DeQuantStub: static INT8 GEMMs, FP32 everywhere else."""
    from torch import nn
    from torch.ao.quantization import QuantWrapper

    assert isinstance(module, nn.Module)
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            wrapper = QuantWrapper(child)
            wrapper.qconfig = qconfig  # type: ignore[assignment]
            setattr(module, name, wrapper)
        else:
            _wrap_linears(child, qconfig)


def build_int8(
    hf_folder: Path,
    fp32_dir: Path,
    out_dir: Path,
    options: QuantizeOptions,
    calibration: Sequence[ModelInputs] = (),
    module: TaskModule | None = None,
) -> Manifest:
    """Quantize the FP32 ONNX graph in `fp32_dir`, or the folder's module (torch), into a verified dir."""
    fp32 = load_verified(fp32_dir)
    if options.backend == "openvino":
        return _build_openvino(hf_folder, fp32, fp32_dir, out_dir, options, list(calibration), module)
    if fp32.runtime != options.runtime:
        raise SageboxError(
            f"{fp32_dir} holds a {fp32.runtime} model; the {options.backend} backend needs {options.runtime}"
        )
    if options.mode == "static":
        calibration = list(calibration)[: options.calibration_batches]

    def hf_module() -> TaskModule:
        return module or load_task_module(detect_task(hf_folder, fp32.task))

    with staged_dir(out_dir) as staging:
        if options.backend == "onnxruntime" and options.mode == "static":
            # Static QDQ cannot quantize inside the fused Attention/EmbedLayerNorm ops: start from a plain
            # graph so every weight MatMul, the attention MatMuls and the embedding Gathers become INT8.
            plain = staging / "fp32-plain.onnx"
            export.to_onnx(hf_module(), plain)
            quantize_onnx_file(plain, staging / fp32.model_file, options, calibration)
            plain.unlink()
        elif options.backend == "onnxruntime":
            quantize_onnx_file(fp32_dir / fp32.model_file, staging / fp32.model_file, options, calibration)
        else:
            quantized = quantize_torch_module(hf_module(), options, calibration)
            with _quiet():
                export.to_torchscript(quantized, staging / fp32.model_file)
        manifest = _finish_int8(staging, fp32, fp32_dir, fp32.runtime, fp32.model_file, options, len(calibration))
    return manifest


OPENVINO_MODEL_FILE = "model.xml"


def _build_openvino(
    hf_folder: Path,
    fp32: Manifest,
    fp32_dir: Path,
    out_dir: Path,
    options: QuantizeOptions,
    calibration: list[ModelInputs],
    module: TaskModule | None,
) -> Manifest:
    """The OpenVINO build: from the folder's PyTorch module (whatever runtime the FP32 directory is for; it lends
    its tokenizer, buckets and task fields)."""
    calibration = calibration[: options.calibration_batches]
    with staged_dir(out_dir) as staging:
        task_module = module or load_task_module(detect_task(hf_folder, fp32.task))
        quantize_openvino(task_module, staging / OPENVINO_MODEL_FILE, options, calibration)
        manifest = _finish_int8(staging, fp32, fp32_dir, "openvino", OPENVINO_MODEL_FILE, options, len(calibration))
    return manifest


def _finish_int8(
    staging: Path,
    fp32: Manifest,
    fp32_dir: Path,
    runtime: Runtime,
    model_file: str,
    options: QuantizeOptions,
    calibration_batches: int,
) -> Manifest:
    """The FP32 model's tokenizer beside the INT8 model file, and the manifest that vouches for both."""
    shutil.copyfile(fp32_dir / fp32.tokenizer.file, staging / fp32.tokenizer.file)
    return write_manifest(
        staging,
        variant="int8",
        runtime=runtime,
        model_file=model_file,
        buckets=fp32.sequence_buckets,
        max_length=fp32.tokenizer.max_length,
        source=fp32.source,
        quantization=options.spec(calibration_batches),
        tokenizer_file=fp32.tokenizer.file,
        **task_fields(fp32),
    )
