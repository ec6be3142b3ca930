"""Training data that needs no download: scikit-learn's 1,797 8x8 digits, scaled to [0, 1], as a TensorDataset."""

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def train_dataset() -> TensorDataset:
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = torch.from_numpy((digits.data / 16.0).astype(np.float32))
    labels = torch.from_numpy(digits.target.astype(np.int64))
    return TensorDataset(features, labels)


def train_loader(batch_size: int, seed: int) -> DataLoader:
    """Shuffled batches, the same order in every process for the same seed (the loader has its own generator)."""
    return DataLoader(
        train_dataset(), batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
