"""Model handlers by runtime; each is imported only when a manifest asks for it (torch import costs seconds)."""

from __future__ import annotations

import importlib

from container.handlers.base import (
    Closable,
    Handler,
    HandlerError,
    HelperProcesses,
    ModelInputs,
    RuntimeOptions,
    close_handler,
    serve_handler_as,
    warm_up_buckets,
)

_RUNTIMES = {
    "torchscript": ("container.handlers.torchscript", "TorchScriptHandler"),
    "onnxruntime": ("container.handlers.onnx", "OnnxRuntimeHandler"),
    "neuron": ("container.handlers.neuron", "NeuronHandler"),
    "openvino": ("container.handlers.openvino", "OpenVinoHandler"),
}


def handler_for(runtime: str) -> Handler:
    try:
        module_name, class_name = _RUNTIMES[runtime]
    except KeyError:
        raise HandlerError(f"no handler for runtime {runtime!r}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandlerError(f"the {runtime} handler cannot be imported: {exc}") from None
    handler: Handler = getattr(module, class_name)()
    return handler


__all__ = [
    "Closable",
    "Handler",
    "HandlerError",
    "HelperProcesses",
    "ModelInputs",
    "RuntimeOptions",
    "close_handler",
    "handler_for",
    "serve_handler_as",
    "warm_up_buckets",
]
