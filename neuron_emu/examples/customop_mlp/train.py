"""Train the tutorial MLP on scikit-learn's digits twice (custom-op ReLU, torch.relu), then trace and save it.

python -m neuron_emu.examples.customop_mlp.train --out-dir build/customop_mlp
python -m neuron_emu.examples.customop_mlp.serve --model-dir build/customop_mlp
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

import neuron_emu
from neuron_emu.examples.customop_mlp.model import MLP, build_relu_library

MODEL_FILE = "mlp.neuron.pt"
TEST_SPLIT_FILE = "test_split.npz"
TRACE_BATCH = 32


@dataclass(frozen=True)
class TrainingResult:
    custom_losses: list[float]
    reference_losses: list[float]
    identical: bool
    train_accuracy: float
    model_file: str
    library_file: str


def digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return (data.data / 16.0).astype(np.float32), data.target.astype(np.int64)


def split(features: np.ndarray, labels: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(0.8 * len(labels))
    train, test = order[:cut], order[cut:]
    return features[train], labels[train], features[test], labels[test]


def train_losses(model: MLP, x: torch.Tensor, y: torch.Tensor, epochs: int, batch: int, seed: int) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), batch):
            index = order[start : start + batch]
            optimizer.zero_grad()
            loss = torch.nn.functional.nll_loss(model(x[index]), y[index])
            loss.backward()
            optimizer.step()
            losses.append(float(loss.item()))
    return losses


def run(out_dir: Path, epochs: int = 5, batch: int = 64, seed: int = 0) -> TrainingResult:
    library = build_relu_library()
    features, labels = digits()
    x_train, y_train, x_test, y_test = split(features, labels, seed)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)

    torch.manual_seed(seed)
    custom = MLP(custom_relu=True)
    reference = MLP(custom_relu=False)
    reference.load_state_dict(custom.state_dict())
    custom_losses = train_losses(custom, x, y, epochs, batch, seed)
    reference_losses = train_losses(reference, x, y, epochs, batch, seed)

    custom.eval()
    with torch.no_grad():
        accuracy = float((custom(x).argmax(dim=1) == y).float().mean())
    traced = neuron_emu.dynamic_batch(neuron_emu.trace(custom, x[:TRACE_BATCH]))
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir / f".{MODEL_FILE}.tmp-{os.getpid()}"
    torch.jit.save(traced, str(partial))
    os.replace(partial, out_dir / MODEL_FILE)
    shutil.copyfile(library, out_dir / library.name)
    np.savez(out_dir / TEST_SPLIT_FILE, x=x_test, y=y_test)
    (out_dir / "cost_plan.txt").write_text(neuron_emu.cost_plan(traced).to_text())
    return TrainingResult(
        custom_losses=custom_losses,
        reference_losses=reference_losses,
        identical=custom_losses == reference_losses,
        train_accuracy=accuracy,
        model_file=MODEL_FILE,
        library_file=library.name,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=Path("build/customop_mlp"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    result = run(args.out_dir, epochs=args.epochs)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(
            f"{len(result.custom_losses)} steps; final loss {result.custom_losses[-1]:.4f} (custom op) vs "
            f"{result.reference_losses[-1]:.4f} (torch.relu); identical every step: {result.identical}"
        )
        print(f"train accuracy {result.train_accuracy:.3f}; saved {args.out_dir / result.model_file}")
    return 0 if result.identical else 1


if __name__ == "__main__":
    sys.exit(main())
