"""The MLP of the Neuron custom-op tutorial, with its ReLU either the custom op or torch.relu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from neuron_emu import custom_op

HERE = Path(__file__).resolve().parent


def build_relu_library(build_directory: Path | None = None) -> Path:
    """Build (or reuse the cached) librelu.so and load it: torch.ops.my_ops.relu_forward / relu_backward."""
    return custom_op.load(
        name="relu",
        compute_srcs=[HERE / "relu.cpp"],
        shape_srcs=[HERE / "shape.cpp"],
        build_directory=build_directory,
    )


class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        out: torch.Tensor = torch.ops.my_ops.relu_forward(x)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        out: torch.Tensor = torch.ops.my_ops.relu_backward(grad, x)
        return out


class MLP(torch.nn.Module):
    def __init__(
        self,
        custom_relu: bool,
        input_size: int = 64,
        output_size: int = 10,
        layers: tuple[int, int] = (120, 84),
    ) -> None:
        super().__init__()
        self.custom_relu = custom_relu
        self.fc1 = torch.nn.Linear(input_size, layers[0])
        self.fc2 = torch.nn.Linear(layers[0], layers[1])
        self.fc3 = torch.nn.Linear(layers[1], output_size)

    def relu(self, x: torch.Tensor) -> torch.Tensor:
        if self.custom_relu:
            out: torch.Tensor = Relu.apply(x)
            return out
        return torch.relu(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.relu(self.fc2(self.relu(self.fc1(x))))
        return torch.log_softmax(self.fc3(hidden), dim=1)
