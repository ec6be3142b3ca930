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
