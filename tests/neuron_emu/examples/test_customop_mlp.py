"""The custom-op MLP example: loss curves identical to torch.relu, and the saved model served elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_emu.examples.customop_mlp import train
from tests.neuron_emu.conftest import run_python


@pytest.mark.slow
def test_custom_op_mlp_trains_like_torch_relu_and_serves(tmp_path: Path) -> None:
    result = train.run(tmp_path, epochs=3)
    assert len(result.custom_losses) == 3 * 23  # 1437 training digits in batches of 64
    assert result.custom_losses == result.reference_losses
    assert result.custom_losses[-1] < result.custom_losses[0] / 4
    assert result.train_accuracy > 0.85
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["cost_plan.txt", "librelu.so", "mlp.neuron.pt", "test_split.npz"]
    )
    out = run_python(
        f"""
        from neuron_emu.examples.customop_mlp import serve
        serve.main(["--model-dir", {str(tmp_path)!r}])
        """
    )
    served = json.loads(out.strip().splitlines()[-1])
    assert served["test_samples"] == 360
    assert served["test_accuracy"] > 0.8
