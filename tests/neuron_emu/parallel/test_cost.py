"""The tensor-parallel plan: collectives from the interconnect figures, per-core weights, fit and fastest degree."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

import neuron_emu
from neuron_emu.hardware import neuron_instances
from neuron_emu.parallel.cost import (
    GIB,
    INTERCONNECT_FILE,
    ParallelPlan,
    ShardProfile,
    allreduce_us,
    fit_compute,
    interconnect,
    parallel_plan,
)
from neuron_emu.parallel.module import ParallelModel


def _profile(**overrides: object) -> ShardProfile:
    settings: dict[str, object] = {
        "model": {"model_type": "bert", "layers": 24, "hidden": 4096, "heads": 16},
        "batch_size": 1,
        "sequence_length": 128,
        "compiler_args": "--auto-cast matmult --auto-cast-type bf16 -O2",
        "traced_degree": 1,
        "candidate_degrees": [1, 2, 4, 8, 16],
        "compute_replicated_us": 100.0,
        "compute_sharded_us": 4000.0,
        "replicated_weight_bytes": 1 * GIB,
        "sharded_weight_bytes": 40 * GIB,
        "allreduces": 48,
        "allreduce_bytes": 128 * 4096 * 4,
    }
    settings.update(overrides)
    return ShardProfile(**settings)  # type: ignore[arg-type]


def test_the_data_file_cites_its_sources_and_marks_its_assumptions() -> None:
    raw = json.loads(INTERCONNECT_FILE.read_text())
    assert all(text.startswith("https://") for text in raw["_sources"].values())
    for chip in raw["chips"].values():
        assert "ASSUMPTION" in chip["_intra_chip_note"]
    links = interconnect()
    # Every Neuron instance neuron_emu.hardware knows has link figures, and no other.
    assert set(links) == set(neuron_instances())
    assert {spec.chip for spec in links.values()} <= set(raw["chips"])
    for spec in links.values():
        assert spec.cores == spec.chips * spec.cores_per_chip
        # Multi-chip instances have a chip-to-chip figure; single-chip ones need none.
        assert (spec.neuronlink_bytes_per_s is not None) == (spec.chips > 1)


def test_an_all_reduce_stays_on_chip_until_the_ranks_span_chips() -> None:
    spec = interconnect()["ml.inf2.48xlarge"]
    message = 1 << 20
    assert allreduce_us(message, 1, spec) == (0.0, "none")
    on_chip, link = allreduce_us(message, 2, spec)
    assert link == "intra-chip"
    assert on_chip == pytest.approx(2 * (spec.hop_latency_us + message / 2 / spec.intra_chip_bytes_per_s * 1e6))
    across, link = allreduce_us(message, 8, spec)
    assert link == "NeuronLink"
    assert spec.neuronlink_bytes_per_s is not None
    slowest = min(spec.intra_chip_bytes_per_s, spec.neuronlink_bytes_per_s)
    assert across == pytest.approx(14 * (spec.hop_latency_us + message / 8 / slowest * 1e6))
    with pytest.raises(ValueError, match="exceed"):
        allreduce_us(message, spec.cores + 2, spec)


def test_a_model_too_big_for_one_core_gets_the_degree_that_makes_it_fit() -> None:
    plan = parallel_plan(_profile())
    assert not plan.fits_one_core
    # 1 GiB replicated + 40 GiB / d against a 16 GiB core share: d = 2 gives 21 GiB, d = 4 gives 11 GiB.
    assert plan.degree_to_fit == 4
    assert any("does NOT fit one NeuronCore; tp_degree 4 makes it fit" in line for line in plan.summary)
    small = plan.instance("ml.inf2.xlarge")
    assert small.fitting_degrees == [] and small.fastest_degree is None
    assert "ml.inf2.xlarge: no degree fits" in plan.summary
    big = plan.instance("ml.inf2.48xlarge")
    assert big.fitting_degrees == [4, 8, 16] and big.smallest_fitting_degree == 4
    assert max(d.degree for d in big.degrees) <= big.neuron_cores
    assert all(d.link != "NeuronLink" for i in plan.instances if i.chips == 1 for d in i.degrees)


def test_the_fastest_degree_follows_whether_compute_or_collectives_dominate() -> None:
    compute_bound = parallel_plan(_profile(compute_sharded_us=400_000.0))
    assert compute_bound.instance("ml.inf2.48xlarge").fastest_degree == 16
    latency_bound = parallel_plan(_profile(compute_sharded_us=40.0))
    assert latency_bound.instance("ml.inf2.48xlarge").fastest_degree == 4  # the smallest that fits
    row = latency_bound.instance("ml.inf2.48xlarge").at(8)
    assert row is not None
    assert row.latency_us == pytest.approx(row.compute_us + row.collective_us)
    assert row.replicas == 24 // 8
    assert row.inferences_per_s == pytest.approx(row.replicas * 1 / (row.latency_us * 1e-6))


def test_a_small_model_fits_one_core_and_the_plan_round_trips() -> None:
    plan = parallel_plan(_profile(replicated_weight_bytes=10**8, sharded_weight_bytes=3 * 10**8))
    assert plan.fits_one_core and plan.degree_to_fit == 1
    assert all(i.fitting_degrees and i.fitting_degrees[0] == 1 for i in plan.instances)
    assert ParallelPlan.from_dict(json.loads(plan.to_json())) == plan
    text = plan.to_text()
    assert text.startswith("neuron_emu tensor-parallel plan - an ESTIMATE")
    assert "ml.trn1.32xlarge" in text and "assumptions:" in text


def test_fit_compute_passes_through_both_points() -> None:
    replicated, sharded = fit_compute([(4, 130.0), (1, 400.0)])
    assert replicated + sharded / 4 == pytest.approx(130.0)
    assert replicated + sharded == pytest.approx(400.0)
    assert fit_compute([(1, 50.0)]) == (50.0, 0.0)


def test_a_traced_plan_agrees_with_the_cost_plans_of_its_graphs(
    sharded: Callable[[int], ParallelModel], saved_tp2: Path
) -> None:
    model = sharded(2)
    profile = model.plan.profile
    shard = neuron_emu.load(saved_tp2 / "rank0.pt")
    segments = [getattr(shard, f"segment{i}") for i in range(int(shard.count))]
    total = sum(neuron_emu.cost_plan(s).totals["latency_us"] for s in segments)
    assert profile.compute_us(2) == pytest.approx(total)
    assert profile.compute_us(1) > profile.compute_us(2) > profile.compute_replicated_us > 0
    assert profile.allreduces == 2 * 2 and profile.allreduce_bytes == 2 * 16 * 64 * 4
    assert profile.candidate_degrees == [1, 2, 4]
    assert model.plan.fits_one_core and model.plan.degree_to_fit == 1
    # The same traced model on a (made-up) core whose HBM share lies between its degree-1 and degree-2 weights.
    share = (profile.weight_bytes_per_core(1) + profile.weight_bytes_per_core(2)) / 2
    cramped = replace(interconnect()["ml.inf2.xlarge"], hbm_bytes_per_core=share)
    tight = parallel_plan(profile, {"ml.inf2.xlarge": cramped})
    assert not tight.fits_one_core and tight.degree_to_fit == 2
    assert tight.instance("ml.inf2.xlarge").fitting_degrees == [2]
    assert any("does NOT fit one NeuronCore; tp_degree 2 makes it fit" in line for line in tight.summary)
    with_links = parallel_plan(profile, {"ml.inf2.xlarge": interconnect()["ml.inf2.xlarge"]})
    assert [i.instance_type for i in with_links.instances] == ["ml.inf2.xlarge"]
    cheaper = replace(interconnect()["ml.inf2.xlarge"], hop_latency_us=0.0)
    slower = with_links.instance("ml.inf2.xlarge").at(2)
    faster = parallel_plan(profile, {"ml.inf2.xlarge": cheaper}).instance("ml.inf2.xlarge").at(2)
    assert slower is not None and faster is not None and faster.collective_us < slower.collective_us


def test_every_parameter_outside_the_encoder_layers_is_replicated() -> None:
    """The head, whatever it is (here a pooler and a 3-label classifier), counts as replicated, once."""
    from neuron_emu.compiler_args import parse_compiler_args
    from neuron_emu.parallel.encoder import encoder_parts
    from neuron_emu.parallel.shard import weight_split
    from tests.neuron_emu.parallel.conftest import head_case

    model: Any = head_case("bert-sequence-classification").model
    parts = encoder_parts(model)
    fp32 = weight_split(parts, parse_compiler_args("--auto-cast none"))
    assert fp32.replicated_bytes + fp32.sharded_bytes == 4 * sum(p.numel() for p in model.parameters())
    sharded = sum(
        p.numel()
        for layer in parts.layers
        for linear in (layer.query, layer.key, layer.value, layer.ffn_in)
        for p in linear.parameters()
    ) + sum(layer.attention_out.weight.numel() + layer.ffn_out.weight.numel() for layer in parts.layers)
    assert fp32.sharded_bytes == 4 * sharded
    head = sum(p.numel() for name, p in model.named_parameters() if not name.startswith("bert.encoder."))
    layers_replicated = sum(
        p.numel()
        for layer in parts.layers
        for module in (layer.attention_norm, layer.ffn_norm, layer.attention_out, layer.ffn_out)
        for name, p in module.named_parameters()
        if name != "weight" or isinstance(module, torch.nn.LayerNorm)
    )
    assert fp32.replicated_bytes == 4 * (head + layers_replicated)
    assert sum(p.numel() for p in model.classifier.parameters()) == 32 * 3 + 3
    # Auto-cast stores Linear weights (the classifier's and pooler's too) in the cast type, embeddings in fp32.
    bf16 = weight_split(parts, parse_compiler_args("--auto-cast matmult --auto-cast-type bf16"))
    linear_head = sum(p.numel() for m in (model.classifier, model.bert.pooler) for p in m.parameters())
    assert fp32.replicated_bytes - bf16.replicated_bytes >= 2 * linear_head
