"""The tutorial's three-layer MLP with the custom-op ReLU, sized for 8x8 digits (64 inputs, 10 classes)."""

import my_ops
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, input_size: int = 8 * 8, output_size: int = 10, layers: tuple[int, int] = (120, 84)) -> None:
        super().__init__()
        self.fc1 = nn.Linear(input_size, layers[0])
        self.fc2 = nn.Linear(layers[0], layers[1])
        self.fc3 = nn.Linear(layers[1], output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r1 = my_ops.Relu.apply(self.fc1(x))
        r2 = my_ops.Relu.apply(self.fc2(r1))
        return torch.log_softmax(self.fc3(r2), dim=1)
