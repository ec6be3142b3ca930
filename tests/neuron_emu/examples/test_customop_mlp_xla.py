"""The torch-neuronx-style custom-op MLP example runs unchanged through `python -m neuron_emu run` (as a user
would run it, in fresh processes) and trains exactly like the same MLP with torch.relu in plain PyTorch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import neuron_emu.examples.customop_mlp_xla as example
from neuron_emu.examples.customop_mlp_xla.digits import train_loader

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = Path(example.__file__).resolve().parent
EPOCHS = 2
BATCH_SIZE = 64  # train.py's batch size, learning rate and seed, restated for the plain-PyTorch reference
LEARNING_RATE = 0.1
SEED = 0


class TorchReluMLP(torch.nn.Module):
    """model.py's MLP with torch.relu instead of the custom op (layers created in the same order)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        return torch.log_softmax(self.fc3(hidden), dim=1)


def reference_training(epochs: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    torch.manual_seed(SEED)
    loader = train_loader(BATCH_SIZE, SEED)
    model = TorchReluMLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    losses: list[float] = []
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses, model.state_dict()


def reference_in_a_fresh_process(epochs: int, cwd: Path) -> tuple[list[float], dict[str, torch.Tensor]]:
    """`reference_training` in a new interpreter, as the example runs: this process's torch settings (intra-op
    threads, flush-to-zero) may have been changed by tests that ran before in it (serving handlers set both), and a
    different reduction order changes the last bits of a loss."""
    out = cwd / "reference.pt"
    code = (
        "import sys, torch\n"
        "from tests.neuron_emu.examples.test_customop_mlp_xla import reference_training\n"
        "losses, state = reference_training(int(sys.argv[1]))\n"
        "torch.save({'losses': losses, 'state': state}, sys.argv[2])\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(epochs), str(out)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
        check=True,
    )
    saved = torch.load(out)
    out.unlink()
    return list(saved["losses"]), dict(saved["state"])


def run_through_runner(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "neuron_emu", "run", str(EXAMPLE / script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow  # builds the custom-op library on a cold cache (~20 s), then two interpreter starts
def test_example_runs_unchanged_and_matches_torch_relu_step_for_step(tmp_path: Path) -> None:
    built = run_through_runner("build.py", [], tmp_path)
    assert built.stdout.strip() == f"built {tmp_path / 'librelu.so'}"
    trained = run_through_runner("train.py", ["--epochs", str(EPOCHS), "--losses", "losses.json"], tmp_path)
    assert "final loss" in trained.stdout

    losses = json.loads((tmp_path / "losses.json").read_text())
    reference_losses, reference_state = reference_in_a_fresh_process(EPOCHS, tmp_path)
    assert len(losses) == EPOCHS * 29  # 1,797 digits in batches of 64
    assert losses == reference_losses  # bit-identical, step for step
    assert losses[-1] < losses[0] / 10

    checkpoint = torch.load(tmp_path / "checkpoints" / "checkpoint.pt")  # plain torch, weights_only
    state = checkpoint["state_dict"]
    assert sorted(state) == sorted(reference_state)
    for name, tensor in state.items():
        assert tensor.device == torch.device("cpu")
        assert torch.equal(tensor, reference_state[name]), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "librelu.so", "losses.json"]


def test_example_sources_are_the_tutorials_files() -> None:
    names = {p.name for p in EXAMPLE.iterdir() if p.suffix in (".py", ".cpp")}
    assert {"build.py", "my_ops.py", "model.py", "train.py", "relu.cpp", "shape.cpp"} <= names
    train = (EXAMPLE / "train.py").read_text()
    for pattern in ('device = "xla"', "xm.mark_step()", "xm.save(", "import torch_xla.core.xla_model as xm"):
        assert pattern in train
    assert "from torch_neuronx.xla_impl import custom_op" in (EXAMPLE / "build.py").read_text()
    assert 'custom_op.load_library("librelu.so")' in (EXAMPLE / "my_ops.py").read_text()
    for name in ("build.py", "my_ops.py", "model.py", "train.py"):  # nothing of the emulator is imported
        lines = (EXAMPLE / name).read_text().splitlines()
        assert not [line for line in lines if line.startswith(("import neuron_emu", "from neuron_emu"))], name
