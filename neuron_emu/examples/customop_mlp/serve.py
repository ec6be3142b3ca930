"""Serve the traced MLP: load it in a fresh process (torch and its custom-op library) and classify digits.

python -m neuron_emu.examples.customop_mlp.serve --model-dir build/customop_mlp
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from neuron_emu.runtime import load

MODEL_FILE = "mlp.neuron.pt"
TEST_SPLIT_FILE = "test_split.npz"


def predict(model_dir: Path, features: np.ndarray) -> np.ndarray:
    """Class predictions; the saved model uses dynamic batching, so any batch size works."""
    model = load(model_dir / MODEL_FILE)  # loads librelu.so from the same directory
    with torch.inference_mode():
        log_probs = model(torch.from_numpy(features.astype(np.float32)))
    predictions: np.ndarray = log_probs.argmax(dim=1).numpy()
    return predictions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=Path("build/customop_mlp"))
    args = parser.parse_args(argv)
    split = np.load(args.model_dir / TEST_SPLIT_FILE)
    predictions = predict(args.model_dir, split["x"])
    accuracy = float((predictions == split["y"]).mean())
    print(json.dumps({"test_samples": len(predictions), "test_accuracy": accuracy}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
