"""compile_qa: the artifact Sagebox's pipeline writes for the Neuron variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import neuron_emu
from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.errors import ArtifactError
from neuron_emu.qa import DEFAULT_QA_COMPILER_ARGS, MODEL_FILE, PLAN_FILE
from tests.neuron_emu.conftest import QAWrapper, run_python


class QAWithCustomOp(torch.nn.Module):
    """A QA model whose logits pass through a Neuron custom op."""

    def __init__(self, inner: QAWrapper) -> None:
        super().__init__()
        self.inner = inner

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.inner(input_ids, attention_mask, token_type_ids)
        return torch.ops.nemu_test.tcm_negate(start), end


def test_compile_qa_writes_model_and_cost_plans(tiny_qa: QAWrapper, tmp_path: Path) -> None:
    artifact = neuron_emu.compile_qa(tiny_qa, [16, 32], 1, None, tmp_path)
    assert artifact.files == (MODEL_FILE, PLAN_FILE)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(artifact.files)
    assert artifact.compiler_args == DEFAULT_QA_COMPILER_ARGS + " -O2"
    assert (artifact.auto_cast, artifact.auto_cast_type, artifact.buckets) == ("matmult", "bf16", (16, 32))
    assert "ml.inf2.xlarge" in artifact.target_instances and "ml.trn1.32xlarge" in artifact.target_instances
    document = json.loads((tmp_path / PLAN_FILE).read_text())
    assert set(document["buckets"]) == {"16", "32"}
    assert artifact.plans[32].totals["flops"] > artifact.plans[16].totals["flops"] > 0
    info = artifact.compile_info()
    assert info.custom_op_libraries == () and info.auto_cast == "matmult" and info.backend == "neuron_emu"
    assert info.to_dict()["target_instances"] == list(artifact.target_instances)
    # Without prices the plans carry no $ figures; with them, every priced instance gets both columns.
    assert all(i.usd_per_hour is None and i.usd_per_million is None for i in artifact.plans[16].instances)
    assert all(i["usd_per_hour"] is None for i in document["buckets"]["16"]["instances"])


def test_compile_qa_prices_the_plans_it_is_given(tiny_qa: QAWrapper, tmp_path: Path) -> None:
    artifact = neuron_emu.compile_qa(tiny_qa, [16], 1, None, tmp_path, prices={"ml.inf2.xlarge": 2.0})
    rows = {i.instance_type: i for i in artifact.plans[16].instances}
    assert rows["ml.inf2.xlarge"].usd_per_hour == 2.0
    assert rows["ml.inf2.xlarge"].usd_per_million == pytest.approx(
        2.0 / (rows["ml.inf2.xlarge"].inferences_per_s * 3600) * 1e6
    )
    assert rows["ml.trn1.2xlarge"].usd_per_hour is None
    document = json.loads((tmp_path / PLAN_FILE).read_text())
    [written] = [i for i in document["buckets"]["16"]["instances"] if i["instance_type"] == "ml.inf2.xlarge"]
    assert written["usd_per_hour"] == 2.0


def test_target_flag_limits_the_target_instances(tiny_qa: QAWrapper, tmp_path: Path) -> None:
    artifact = neuron_emu.compile_qa(tiny_qa, [16], 1, "--target trn1", tmp_path)
    assert artifact.target_instances == ("ml.trn1.2xlarge", "ml.trn1.32xlarge")


def test_compiled_artifact_runs_in_a_new_process_with_any_batch(tiny_qa: QAWrapper, tmp_path: Path) -> None:
    neuron_emu.compile_qa(tiny_qa, [16, 32], 2, "--auto-cast none", tmp_path)
    ids = torch.randint(0, 1000, (3, 32))
    mask = torch.ones(3, 32, dtype=torch.long)
    mask[2, 25:] = 0
    types = torch.zeros(3, 32, dtype=torch.long)
    torch.save((ids, mask, types), tmp_path.parent / "inputs.pt")
    out = run_python(
        f"""
        import json, sys, torch, neuron_emu
        model = neuron_emu.load({str(tmp_path / MODEL_FILE)!r})
        start, end = model(*torch.load({str(tmp_path.parent / "inputs.pt")!r}))
        print(json.dumps([start.tolist(), end.tolist(), "transformers" in sys.modules]))
        """
    )
    start, end, imported_transformers = json.loads(out)
    with torch.no_grad():
        ref_start, ref_end = tiny_qa(ids, mask, types)
    assert torch.allclose(torch.tensor(start), ref_start, atol=1e-5)
    assert torch.allclose(torch.tensor(end), ref_end, atol=1e-5)
    assert imported_transformers is False


def test_custom_op_libraries_travel_with_the_artifact(
    tiny_qa: QAWrapper, test_ops: LoadedLibrary, tmp_path: Path
) -> None:
    artifact = neuron_emu.compile_qa(QAWithCustomOp(tiny_qa).eval(), [16], 1, None, tmp_path)
    assert artifact.custom_op_libraries == ("libnemu_test.so",)
    assert (tmp_path / "libnemu_test.so").read_bytes() == test_ops.path.read_bytes()
    assert artifact.compile_info().custom_op_libraries == ("libnemu_test.so",)


@pytest.mark.parametrize(
    ("buckets", "batch", "message"),
    [
        ([32, 16], 1, "strictly increasing"),
        ([4], 1, "integers >= 8"),
        ([], 1, "integers >= 8"),
        ([16], 0, "batch_size"),
    ],
)
def test_compile_qa_checks_its_arguments(
    tiny_qa: QAWrapper, tmp_path: Path, buckets: list[int], batch: int, message: str
) -> None:
    with pytest.raises(ArtifactError, match=message):
        neuron_emu.compile_qa(tiny_qa, buckets, batch, None, tmp_path)
    assert not any(tmp_path.iterdir())


def test_compile_qa_needs_start_and_end_logits(tmp_path: Path) -> None:
    class OneOutput(torch.nn.Module):
        def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
            return (ids * mask + types).float()

    with pytest.raises(ArtifactError, match=r"must return \(start_logits, end_logits\)"):
        neuron_emu.compile_qa(OneOutput().eval(), [16], 1, None, tmp_path)
    assert not any(tmp_path.iterdir())
