"""neuron_emu.llm.cost: sizes from a config, which Neuron instance sizes and degrees fit, and the published figures
the estimate is fitted to and held out against (neuron_emu/data/llm_cost.json), all computed, none typed in here."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from neuron_emu.hardware import GIB, tensor_parallel_degrees
from neuron_emu.llm.config import DecoderConfig, read_config
from neuron_emu.llm.cost.constants import CostError, cost_data, load_constants
from neuron_emu.llm.cost.cores import hardware
from neuron_emu.llm.cost.cpu import CpuInstance, cpu_plan
from neuron_emu.llm.cost.fit import checks, cpu_checks, measured_rows, published_rows, refit, tolerance
from neuron_emu.llm.cost.neuron import neuron_plan
from neuron_emu.llm.cost.sizing import decoder_fit, kv_bytes_per_token, parameter_count, shard, weight_bytes
from neuron_emu.llm.cost.timing import _sum_max

REPO = Path(__file__).resolve().parents[3]
CONFIGS = REPO / "infra" / "examples" / "llm_configs"
SHA = re.compile(r"@ [0-9a-f]{40}$")


def config(name: str) -> DecoderConfig:
    return read_config(json.loads((CONFIGS / f"{name}.json").read_text()))


@pytest.fixture(scope="module")
def configs() -> dict[str, DecoderConfig]:
    return {path.stem: read_config(json.loads(path.read_text())) for path in sorted(CONFIGS.glob("*.json"))}


# --- sizes -----------------------------------------------------------------------------------------------------


def _tiny(kind: str) -> Any:
    import transformers as t

    common: dict[str, Any] = {"vocab_size": 96, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    if kind in ("llama", "qwen2"):
        shape: dict[str, Any] = {
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_hidden_layers": 2,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "max_position_embeddings": 128,
            "tie_word_embeddings": kind == "qwen2",
            **common,
        }
        if kind == "llama":
            return t.LlamaForCausalLM(t.LlamaConfig(**shape))
        return t.Qwen2ForCausalLM(t.Qwen2Config(**shape))
    if kind == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(n_embd=64, n_layer=2, n_head=8, n_positions=128, **common))
    extra: dict[str, Any] = {"word_embed_proj_dim": 32} if kind == "opt-proj" else {}
    if kind == "opt-post":
        extra["do_layer_norm_before"] = False
    return t.OPTForCausalLM(
        t.OPTConfig(
            hidden_size=64,
            ffn_dim=96,
            num_hidden_layers=2,
            num_attention_heads=8,
            max_position_embeddings=128,
            **extra,
            **common,
        )
    )


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2", "opt", "opt-post", "opt-proj"])
def test_parameter_count_equals_transformers_own_model(kind: str) -> None:
    model = _tiny(kind)
    counted = sum(p.numel() for p in model.parameters())  # tied weights once, as the planner counts them
    assert parameter_count(read_config(model.config.to_dict())) == counted


def test_weights_and_kv_cache_follow_the_dtype() -> None:
    opt = config("opt-30b")
    assert weight_bytes(opt, "fp32") == 2 * weight_bytes(opt, "bf16") == 2 * weight_bytes(opt, "fp16")
    assert kv_bytes_per_token(opt, "bf16") == 2 * opt.layers * opt.kv_heads * opt.head_dim * 2
    with pytest.raises(CostError, match="dtype 'int3'"):
        weight_bytes(opt, "int3")


def test_kv_heads_are_replicated_to_one_per_core_beyond_their_count() -> None:
    llama70 = config("llama-2-70b")  # 8 KV heads
    assert shard(llama70, 4).kv_heads_per_core == 2
    assert shard(llama70, 8).kv_heads_per_core == 1
    assert shard(llama70, 16, pad_heads=True).kv_heads_per_core == 1
    one_core = 2 * llama70.layers * 1 * llama70.head_dim * 2
    assert shard(llama70, 16, pad_heads=True).kv_bytes_per_token == one_core


def test_nxd_refuses_uneven_heads_and_padding_is_marked() -> None:
    llama13 = config("llama-2-13b")
    refused = shard(llama13, 24)
    assert refused.problem == "40 heads not divisible by 24" and not refused.padded
    padded = shard(llama13, 24, pad_heads=True)
    assert padded.padded and padded.heads_per_core == 2 == math.ceil(40 / 24)
    assert padded.weight_bytes > shard(llama13, 8).weight_bytes / 3  # padding costs memory
    assert shard(llama13, 8).problem is None
    assert shard(config("llama-2-70b"), 8).problem is None


def test_the_sum_of_a_roofline_over_a_context_range_is_exact() -> None:
    for a1, b1, a2, b2, lo, hi in [
        (5, 0.1, 1, 0.5, 3, 40),
        (1, 0.5, 5, 0.1, 3, 40),
        (2, 1, 2, 1, 0, 9),
        (9, 0, 1, 1, 0, 5),
    ]:
        brute = sum(max(a1 + b1 * x, a2 + b2 * x) for x in range(lo, hi + 1))
        assert _sum_max(a1, b1, a2, b2, lo, hi) == pytest.approx(brute)
    assert _sum_max(1, 1, 2, 2, 5, 4) == 0


# --- which sizes fit --------------------------------------------------------------------------------------------


def _fits(name: str, instance: str, dtype: str = "fp16", sequence: int = 2048) -> dict[int, tuple[bool, str]]:
    rows = neuron_plan(config(name), dtype=dtype, sequence=sequence, instances=[instance])
    return {r.tp: (r.fits, r.reason) for r in rows}


def _arithmetic(name: str, instance: str, tp: int, dtype: str = "fp16", sequence: int = 2048) -> bool:
    """Weights / tp + one sequence's cache + the reserve against a core's HBM, written out independently."""
    c, constants, hw = config(name), load_constants(), hardware(instance)
    if c.heads % tp or c.intermediate_size % tp:
        return False
    per_core = weight_bytes(c, dtype) / tp + sequence * kv_bytes_per_token(c, dtype) / min(tp, c.kv_heads)
    return per_core + constants.reserve_gib_per_core * GIB <= hw.hbm_bytes_per_core


def test_inf2_48xlarge_degrees_for_opt_30b() -> None:
    fits = _fits("opt-30b", "ml.inf2.48xlarge")
    assert sorted(fits) == list(tensor_parallel_degrees("inf2"))
    assert fits[8][0], "OPT-30B runs at tp 8 on inf2.48xlarge (AWS's published runs)"
    assert fits[24] == (False, "56 heads not divisible by 24")
    assert not fits[1][0] and fits[1][1] == "weights 55.8 GiB > 1 core x 16.0 GiB"
    for tp, (ok, _) in fits.items():
        assert ok == _arithmetic("opt-30b", "ml.inf2.48xlarge", tp), tp


def test_inf2_48xlarge_degrees_for_opt_66b() -> None:
    fits = _fits("opt-66b", "ml.inf2.48xlarge")
    # AWS: "greater than 8 * 16 GB in float16, so it will not fit into memory using this tensor parallel degree"
    assert not fits[8][0]
    pattern = r"16\.\d GiB/core \(weights 15\.\d GiB, KV 0\.\d GiB, reserve 1\.0 GiB\) > 16\.0 GiB"
    assert re.fullmatch(pattern, fits[8][1])
    assert fits[24][0]
    for tp, (ok, _) in fits.items():
        assert ok == _arithmetic("opt-66b", "ml.inf2.48xlarge", tp), tp
    # the same holds on trn1.32xlarge, whose degrees dividing 72 heads stop at 8
    trn1 = _fits("opt-66b", "ml.trn1.32xlarge")
    assert not any(ok for ok, _ in trn1.values())
    assert trn1[16] == (False, "72 heads not divisible by 16")


def test_the_largest_batch_fits_and_the_next_does_not() -> None:
    c = config("llama-2-13b")
    [row] = [r for r in neuron_plan(c, sequence=2048, instances=["ml.inf2.48xlarge"]) if r.tp == 8]
    assert row.fits and row.max_batch
    constants = load_constants()
    assert decoder_fit(c, "ml.inf2.48xlarge", 8, sequence=2048, batch=row.max_batch, constants=constants).fits
    assert not decoder_fit(c, "ml.inf2.48xlarge", 8, sequence=2048, batch=2 * row.max_batch).fits
    assert row.tokens_per_s_max_batch is not None and row.tokens_per_s_b1 is not None
    assert row.tokens_per_s_max_batch > row.tokens_per_s_b1
    assert row.replicas == 3


def test_a_sequence_past_the_models_positions_is_refused() -> None:
    with pytest.raises(CostError, match="exceeds the model's 2048 positions"):
        neuron_plan(config("opt-30b"), sequence=4096)


def test_prices_give_dollars_per_million_tokens_and_their_absence_none() -> None:
    c = config("llama-2-13b")
    rows = neuron_plan(c, sequence=1024, instances=["ml.inf2.xlarge"], prices={"ml.inf2.xlarge": 1.0})
    [tp2] = [r for r in rows if r.tp == 2]
    assert tp2.fits and tp2.tokens_per_s_b1 and tp2.usd_per_m_tokens_b1
    assert tp2.usd_per_m_tokens_b1 == pytest.approx(1e6 / 3600 / tp2.tokens_per_s_b1)
    [unpriced] = [r for r in neuron_plan(c, sequence=1024, instances=["ml.inf2.xlarge"]) if r.tp == 2]
    assert unpriced.usd_per_m_tokens_b1 is None


# --- the published figures --------------------------------------------------------------------------------------


def test_every_published_row_names_its_source_file_and_commit() -> None:
    rows = published_rows()
    assert len({r.id for r in rows}) == len(rows)
    for row in rows:
        assert row.source.startswith("github.com/aws-neuron/aws-neuron-sdk ") and SHA.search(row.source), row.id
        assert row.use in ("fit", "held_out", "excluded") and row.expect in ("within", "miss")
        assert row.counts in ("output", "input+output") or row.use == "excluded"
        assert row.note or row.use == "fit"
    assert [r.id for r in rows if r.use == "fit"] == list(load_constants().fitted_to)


def test_refitting_the_two_fit_rows_gives_the_stored_constants(configs: dict[str, DecoderConfig]) -> None:
    stored = load_constants()
    fresh = refit(configs, stored)
    for name in ("hbm_efficiency", "collective_hop_us", "cpu_bytes_per_s_per_vcpu", "cpu_flops_per_s_per_vcpu"):
        assert getattr(fresh, name) == pytest.approx(getattr(stored, name), rel=1e-3), name
    # AWS publishes "about 1-2 us" per ring hop; the fit did not use it
    assert 1.0 <= stored.collective_hop_us <= 2.0
    assert 0 < stored.hbm_efficiency < 1


def test_held_out_rows_are_within_tolerance_or_reported_misses(configs: dict[str, DecoderConfig]) -> None:
    limit = tolerance()
    results = checks(configs, load_constants())
    assert {r.id for r in results} == {r.id for r in published_rows() if r.use != "excluded"}
    for check in results:
        if check.use == "fit":
            assert abs(check.error) < 0.005, check.id
        elif check.expect == "within":
            assert abs(check.error) <= limit, f"{check.id}: {check.error:+.1%}"
        else:  # a miss the documentation reports: it must still be one
            assert abs(check.error) > limit, f"{check.id} is no longer a miss: {check.error:+.1%}"
    assert sum(c.use == "held_out" and c.expect == "within" for c in results) >= 8


def test_the_cpu_engine_fit_meets_its_two_measurements(configs: dict[str, DecoderConfig]) -> None:
    limit = tolerance()
    for measured, projected in cpu_checks(configs, load_constants()):
        error = projected / measured.tokens_per_s - 1
        if measured.use == "fit":
            assert abs(error) < 0.005, measured.id
        elif measured.expect == "within":
            assert abs(error) <= limit, measured.id
        else:
            assert abs(error) > limit, measured.id
    assert [m.id for m in measured_rows() if m.use == "fit"] == list(load_constants().cpu_fitted_to)


def test_cpu_rows_fit_memory_and_scale_with_vcpus() -> None:
    smol = config("smollm2-135m-instruct")
    rows = cpu_plan(
        smol,
        [CpuInstance("ml.c6i.2xlarge", 8, 16), CpuInstance("ml.c6i.4xlarge", 16, 32)],
        sequence=2048,
        constants=load_constants(),
        prices={"ml.c6i.2xlarge": 0.408},
    )
    small, large = rows
    assert small.fits and large.fits and small.max_batch and large.max_batch
    assert large.tokens_per_s_b1 == pytest.approx(2 * (small.tokens_per_s_b1 or 0))
    assert small.usd_per_m_tokens_max_batch is not None and large.usd_per_m_tokens_max_batch is None
    [big] = cpu_plan(
        config("opt-30b"), [CpuInstance("ml.c6i.2xlarge", 8, 16)], sequence=2048, constants=load_constants()
    )
    assert not big.fits and big.reason.startswith("118.") and "FP32 weights 111.7" in big.reason


def test_the_data_file_states_every_constants_kind() -> None:
    for name, entry in cost_data()["constants"].items():
        assert entry["kind"] in ("fitted", "assumption"), name
        assert entry["about"], name
        assert ("fitted_to" in entry) == (entry["kind"] == "fitted"), name
