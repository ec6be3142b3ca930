"""infra/examples/llm.json's inf2-llm: the demo LLM compiled for NeuronCores plans with one server worker and TGI's
Neuron variables naming its compiled shapes (all read by the serving container), and it is refused like any
emulated model where emulation is not allowed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from infra.errors import TargetError
from infra.plan import plan_endpoint
from infra.settings import AppSettings
from infra.targets import load_targets

LLM_TARGETS = Path(__file__).resolve().parents[2] / "infra" / "examples" / "llm.json"


def test_the_inf2_llm_target_plans_with_the_compiled_shapes_in_its_environment(settings: AppSettings) -> None:
    inf2 = next(t for t in load_targets(LLM_TARGETS) if t.name == "inf2-llm")
    in_s3 = inf2.model_copy(
        update={"model_data": "s3://models/llm/neuron/model.tar.gz", "neuron_backend": "neuron_emu"}
    )
    plan = plan_endpoint(in_s3, settings)  # the session allows emulation, as the box does
    assert (plan.instance.name, plan.variant, plan.tensor_parallel) == ("ml.inf2.xlarge", "neuron", 1)
    environment = plan.environment
    assert environment["SAGEMAKER_MODEL_SERVER_WORKERS"] == "1"
    assert (environment["HF_NUM_CORES"], environment["MAX_BATCH_SIZE"], environment["MAX_TOTAL_TOKENS"]) == (
        "1",
        "4",
        "1024",
    )
    with pytest.raises(TargetError, match="compiled by neuron_emu"):
        plan_endpoint(in_s3, dataclasses.replace(settings, allow_emulated=False))
