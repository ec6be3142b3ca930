"""ReLU as an autograd Function over the custom ops torch.ops.my_ops.relu_forward / relu_backward (librelu.so)."""

from typing import Any

import torch
import torch_neuronx  # noqa: F401  (as in the tutorial)
from torch_neuronx.xla_impl import custom_op

custom_op.load_library("librelu.so")  # written to the current folder by build.py


class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        output: torch.Tensor = torch.ops.my_ops.relu_forward(input)
        return output

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (input,) = ctx.saved_tensors
        grad_input: torch.Tensor = torch.ops.my_ops.relu_backward(grad, input)
        return grad_input
