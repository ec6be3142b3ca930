"""Tensor-parallel targets at synth: the degree against the instance's NeuronCores and the compiled manifest, and
the container environment sized to one server worker per model replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from container.manifest import CompileSpec
from infra.catalog import instance
from infra.errors import TargetError
from infra.plan import plan_endpoint
from infra.rules import check_tensor_parallel
from infra.settings import AppSettings
from infra.targets import Target, load_targets, parse_targets
from tests.infra.model_tarballs import manifest_for, write_tarball

WORKERS = "SAGEMAKER_MODEL_SERVER_WORKERS"
THREADS = "SAGEBOX_INTRA_OP_THREADS"


def settings_for(tmp_path: Path) -> AppSettings:
    (tmp_path / "container").mkdir(exist_ok=True)
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    return AppSettings(model_dir=tmp_path, build_context=tmp_path, allow_emulated=True)


def tp_target(model_data: Path | str, **fields: Any) -> Target:
    base = {
        "name": "inf2-tp2",
        "instance_type": "ml.inf2.xlarge",
        "variant": "neuron",
        "tensor_parallel": 2,
        "model_data": str(model_data),
    }
    return parse_targets({"targets": [{**base, **fields}]})[0]


def compiled(tmp_path: Path, degree: int, heads: int | None = 4, name: str = "tp") -> Path:
    return write_tarball(tmp_path / name / "model.tar.gz", "neuron", tensor_parallel=degree, num_attention_heads=heads)


def test_a_tp_target_plans_one_worker_per_replica(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    plan = plan_endpoint(tp_target(compiled(tmp_path, 2)), settings)
    assert plan.tensor_parallel == 2 and plan.neuron_backend == "neuron_emu"
    # ml.inf2.xlarge: 2 NeuronCores, 4 vCPUs. One replica spans both cores: 1 server worker with all 4 threads.
    assert (plan.environment[WORKERS], plan.environment[THREADS]) == ("1", "4")
    # The same model single-core: one worker per core, as before.
    single = plan_endpoint(tp_target(compiled(tmp_path, 1, name="single"), tensor_parallel=1), settings)
    assert (single.environment[WORKERS], single.environment[THREADS]) == ("2", "2")
    # inf2.24xlarge (12 cores, 96 vCPUs) at degree 4: 3 replicas, 32 threads each.
    big = plan_endpoint(
        tp_target(compiled(tmp_path, 4, name="tp4"), instance_type="ml.inf2.24xlarge", tensor_parallel=4), settings
    )
    assert (big.environment[WORKERS], big.environment[THREADS]) == ("3", "32")


def test_a_degree_above_the_instance_cores_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TargetError) as caught:
        plan_endpoint(tp_target(compiled(tmp_path, 4), tensor_parallel=4), settings_for(tmp_path))
    assert str(caught.value) == "target 'inf2-tp2': tensor_parallel 4 exceeds the 2 NeuronCores of ml.inf2.xlarge"


def test_the_degree_must_be_the_compiled_one(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    single = compiled(tmp_path, 1)
    with pytest.raises(TargetError) as caught:
        plan_endpoint(tp_target(single), settings)
    message = str(caught.value)
    assert message.startswith("target 'inf2-tp2': sets tensor_parallel 2 but the model inside ")
    assert message.endswith(
        "was compiled for tensor_parallel 1: compile it with `sagebox compile --tensor-parallel 2`, or set "
        "tensor_parallel: 1"
    )
    assert "\n" not in message
    # A tp model behind a target that does not say so is refused too: its workers would be sized per core.
    with pytest.raises(TargetError, match=r"sets tensor_parallel 1 but .* was compiled for tensor_parallel 2"):
        plan_endpoint(tp_target(compiled(tmp_path, 2, name="tp2"), tensor_parallel=1), settings)


def test_a_degree_that_does_not_divide_the_recorded_heads_is_refused(tmp_path: Path) -> None:
    # `sagebox compile` never writes such a manifest (container.manifest refuses it too); a hand-edited one, built
    # here without validation, must still be refused at synth.
    recorded = manifest_for("neuron", {"model.pt": b"", "tokenizer.json": b""}).compile
    assert recorded is not None
    odd = CompileSpec.model_construct(**{**recorded.model_dump(), "tensor_parallel": 2, "num_attention_heads": 3})
    with pytest.raises(TargetError) as caught:
        check_tensor_parallel("inf2-tp2", 2, "neuron", instance("ml.inf2.xlarge"), "neuron_emu", odd)
    assert str(caught.value) == "target 'inf2-tp2': tensor_parallel 2 does not divide the model's 3 attention heads"
    # Heads not recorded (a manifest from before they were): the degree check alone applies.
    unknown_heads = compiled(tmp_path, 2, heads=None)
    assert plan_endpoint(tp_target(unknown_heads), settings_for(tmp_path)).tensor_parallel == 2


def test_tensor_parallel_needs_a_neuron_emu_model_on_a_neuron_instance(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    cpu = write_tarball(tmp_path / "fp32" / "model.tar.gz", "fp32")
    with pytest.raises(TargetError) as caught:
        plan_endpoint(tp_target(cpu, instance_type="ml.c5.2xlarge", variant="fp32"), settings)
    assert str(caught.value) == (
        "target 'inf2-tp2': tensor_parallel 2 shards a neuron model over NeuronCores; ml.c5.2xlarge with a 'fp32' "
        "artifact has none to shard over (set tensor_parallel: 1)"
    )
    s3 = {"model_data": "s3://models/neuronx/model.tar.gz", "neuron_backend": "torch_neuronx", "image": "build"}
    (tmp_path / "container" / "Dockerfile.neuron").write_text("FROM scratch\n")
    with pytest.raises(TargetError) as caught:
        plan_endpoint(tp_target(**s3), settings)
    assert str(caught.value) == (
        "target 'inf2-tp2': tensor_parallel 2 is served only for neuron_emu models here, not torch_neuronx"
    )
    # An S3 neuron_emu model: synth cannot read its manifest, so only the cores are checked.
    emulated = plan_endpoint(tp_target(**{**s3, "neuron_backend": "neuron_emu"}), settings)
    assert emulated.tensor_parallel == 2 and emulated.environment[WORKERS] == "1"


def test_the_bundled_targets_stay_single_core() -> None:
    # No default tp target: the default app and the box synthesize with `sagebox build`'s single-core model.
    assert {t.tensor_parallel for t in load_targets()} == {1}
    zero = {"name": "x", "instance_type": "ml.inf2.xlarge", "model_data": "m", "tensor_parallel": 0}
    with pytest.raises(
        TargetError, match=r"targets\[0\] \(x\): tensor_parallel: Input should be greater than or equal"
    ):
        parse_targets({"targets": [zero]})
