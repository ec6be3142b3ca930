"""Environment variables: defaults, SageMaker's names, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from container import env
from container.env import EnvError, ServerSettings


def test_defaults_follow_the_sagemaker_contract() -> None:
    s = ServerSettings.from_env({})
    assert s.port == 8080 and s.workers == 1 and s.timeout_s == 60
    assert s.model_dir == Path("/opt/ml/model")
    assert s.max_body_bytes == 6 * 1024 * 1024
    assert s.intra_op_threads == env.available_cpus()
    assert s.drain_seconds <= 30
    assert s.spin_wait is True  # ONNX Runtime's own default
    assert s.flush_denormals is True
    assert s.max_batch_size == 8 and s.max_batch_tokens == 512
    assert s.admission_control is True


def test_sagemaker_variables_are_honoured() -> None:
    s = ServerSettings.from_env(
        {
            env.BIND_TO_PORT: "9000",
            env.MODEL_SERVER_WORKERS: "2",
            env.MODEL_SERVER_TIMEOUT: "15",
            env.MODEL_DIR: "/models/x",
            env.MAX_BATCH_WAIT_MS: "2.5",
            env.MAX_BATCH_TOKENS: "2048",
            env.SPIN_WAIT: "off",
            env.FLUSH_DENORMALS: "0",
            env.ADMISSION_CONTROL: "off",
        }
    )
    assert (s.port, s.workers, s.timeout_s, s.model_dir) == (9000, 2, 15, Path("/models/x"))
    assert s.intra_op_threads == max(1, env.available_cpus() // 2)  # CPUs are shared between workers
    assert s.max_batch_wait_ms == 2.5
    assert s.max_batch_tokens == 2048
    assert s.spin_wait is False and s.flush_denormals is False
    assert s.admission_control is False


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        (env.BIND_TO_PORT, "http", "must be an integer"),
        (env.BIND_TO_PORT, "70000", "in [1, 65535]"),
        (env.MODEL_SERVER_WORKERS, "0", "in [1, 64]"),
        (env.MAX_BATCH_WAIT_MS, "-1", ">= 0.0"),
        (env.LOG_LEVEL, "loud", "must be one of"),
        (env.SPIN_WAIT, "sometimes", "must be 1/true"),
        (env.ADMISSION_CONTROL, "maybe", "must be 1/true"),
        (env.LISTEN_FD, "-1", ">= 0"),
        (env.LISTEN_FD, "three", "must be an integer"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, fragment: str) -> None:
    with pytest.raises(EnvError, match=name) as err:
        ServerSettings.from_env({name: value})
    assert fragment in str(err.value)


def test_an_inherited_listening_socket_is_named_by_its_descriptor() -> None:
    assert ServerSettings.from_env({}).listen_fd is None  # a container binds SAGEMAKER_BIND_TO_PORT itself
    assert ServerSettings.from_env({env.LISTEN_FD: " 7 "}).listen_fd == 7


def test_available_cpus_is_positive_and_bounded() -> None:
    import os

    assert 1 <= env.available_cpus() <= (os.cpu_count() or 1)


def test_the_llm_containers_spellings_of_a_decoders_shapes_are_read_as_one_setting() -> None:
    s = ServerSettings.from_env(
        {
            env.OPTION_TENSOR_PARALLEL_DEGREE: "2",
            env.HF_NUM_CORES: "2",
            env.OPTION_MAX_ROLLING_BATCH_SIZE: "4",
            env.TGI_MAX_BATCH_SIZE: "4",
            env.OPTION_N_POSITIONS: "1024",
            env.HF_AUTO_CAST_TYPE: "bfloat16",
        }
    )
    assert s.tensor_parallel_degree == env.Named(2, env.OPTION_TENSOR_PARALLEL_DEGREE)
    assert s.llm_batch_size == env.Named(4, env.OPTION_MAX_ROLLING_BATCH_SIZE)
    assert (s.max_total_tokens, s.max_total_tokens_variable) == (1024, env.OPTION_N_POSITIONS)
    assert s.auto_cast_type == env.Named("bf16", env.HF_AUTO_CAST_TYPE)
    lmi_max = ServerSettings.from_env({env.TENSOR_PARALLEL_DEGREE: "max"}).tensor_parallel_degree
    assert lmi_max == env.Named(0, "TENSOR_PARALLEL_DEGREE")  # all the cores there are
    unset = ServerSettings.from_env({env.MAX_TOTAL_TOKENS: "0"})  # TGI's 0: derived
    assert (unset.max_total_tokens, unset.tensor_parallel_degree, unset.llm_batch_size) == (0, None, None)
    assert set(env.TGI_VARIABLES) >= {"TENSOR_PARALLEL_DEGREE", "HF_NUM_CORES", "MAX_BATCH_SIZE", "HF_BATCH_SIZE"}


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({env.TENSOR_PARALLEL_DEGREE: "2", env.HF_NUM_CORES: "4"}, "TENSOR_PARALLEL_DEGREE 2 and HF_NUM_CORES 4"),
        ({env.TENSOR_PARALLEL_DEGREE: "max", env.HF_NUM_CORES: "1"}, "TENSOR_PARALLEL_DEGREE max and HF_NUM_CORES 1"),
        ({env.MAX_TOTAL_TOKENS: "512", env.OPTION_N_POSITIONS: "1024"}, "MAX_TOTAL_TOKENS 512 and OPTION_N_POSITIONS"),
        ({env.HF_BATCH_SIZE: "2", env.TGI_MAX_BATCH_SIZE: "3"}, "HF_BATCH_SIZE 2 and MAX_BATCH_SIZE 3 disagree"),
        ({env.HF_NUM_CORES: "max"}, "HF_NUM_CORES must be an integer"),
        ({env.OPTION_MAX_ROLLING_BATCH_SIZE: "0"}, "OPTION_MAX_ROLLING_BATCH_SIZE must be >= 1"),
        ({env.HF_AUTO_CAST_TYPE: "int8"}, "HF_AUTO_CAST_TYPE must be one of"),
    ],
)
def test_spellings_that_disagree_or_bad_values_are_one_line(values: dict[str, str], fragment: str) -> None:
    with pytest.raises(EnvError) as err:
        ServerSettings.from_env(values)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("cpus", "workers", "threads", "engine"),
    [
        (2, "1", None, 1),  # one CPU left to the event loop
        (8, "1", "8", 7),  # the planner's 8 threads on ml.c6i.2xlarge: capped
        (8, "1", "3", 3),  # fewer than the cap: as set
        (8, "2", None, 3),  # two workers share the CPUs
        (1, "1", None, 1),  # never below one thread
    ],
)
def test_the_generation_engine_leaves_a_cpu_to_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, cpus: int, workers: str, threads: str | None, engine: int
) -> None:
    monkeypatch.setattr(env, "available_cpus", lambda: cpus)
    variables = {env.MODEL_SERVER_WORKERS: workers, **({env.INTRA_OP_THREADS: threads} if threads else {})}
    s = ServerSettings.from_env(variables)
    assert s.engine_threads == engine
    assert s.intra_op_threads == int(threads or cpus // int(workers))  # the encoders' threads are unchanged
