"""The CPU engine's limits under the LMI/TGI names: a batch size is the cache's slots, tensor parallelism and a
narrower auto-cast type are refused in one line (the CPU engine runs one FP32 process)."""

from __future__ import annotations

import pytest

from container.env import EnvError, ServerSettings
from container.generation.limits import EngineLimits, engine_limits
from neuron_emu.llm.config import DecoderConfig, read_config
from tests.container.generation.tiny_decoders import engine_inputs, tiny_decoder

GIB = 1 << 30


@pytest.fixture(scope="module")
def config() -> DecoderConfig:
    return read_config(engine_inputs(tiny_decoder("llama"))[0])


def _limits(config: DecoderConfig, **env: str) -> EngineLimits:
    return engine_limits(ServerSettings.from_env(env), config, GIB)


def test_a_batch_size_sets_the_slots(config: DecoderConfig) -> None:
    limits = _limits(config, MAX_TOTAL_TOKENS="128", MAX_BATCH_SIZE="3")
    assert (limits.slots, limits.cache_tokens) == (3, 384)
    lmi = _limits(config, OPTION_N_POSITIONS="64", OPTION_MAX_ROLLING_BATCH_SIZE="5", MAX_BATCH_TOTAL_TOKENS="640")
    assert (lmi.slots, lmi.max_total_tokens, lmi.total_tokens_variable) == (5, 64, "OPTION_N_POSITIONS")


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"MAX_TOTAL_TOKENS": "128", "MAX_BATCH_TOTAL_TOKENS": "256", "MAX_BATCH_SIZE": "3"}, "MAX_BATCH_SIZE 3 seq"),
        ({"TENSOR_PARALLEL_DEGREE": "2"}, "TENSOR_PARALLEL_DEGREE 2 asks for tensor parallelism"),
        ({"HF_AUTO_CAST_TYPE": "bf16"}, "HF_AUTO_CAST_TYPE bf16 contradicts the model"),
        ({"OPTION_N_POSITIONS": "4096"}, "OPTION_N_POSITIONS 4096 exceeds the model's context"),
    ],
)
def test_what_the_cpu_engine_cannot_do_is_one_line(config: DecoderConfig, env: dict[str, str], fragment: str) -> None:
    with pytest.raises(EnvError) as err:
        _limits(config, **env)
    assert fragment in str(err.value)


def test_lmis_max_degree_and_float32_are_what_the_cpu_engine_does(config: DecoderConfig) -> None:
    limits = _limits(config, TENSOR_PARALLEL_DEGREE="max", HF_AUTO_CAST_TYPE="fp32")
    assert limits.slots == 16
