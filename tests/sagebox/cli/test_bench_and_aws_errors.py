"""`sagebox bench` refuses malformed endpoint options before any AWS call, and an AWS set-up problem (no
credentials, unknown profile, no region) is the user's one-line error, never an "internal error"."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagebox.cli.app import EXIT_USER_ERROR, main
from sagebox.errors import aws_setup_error


@pytest.fixture
def no_aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with no AWS configuration at all, and no local box."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("SAGEBOX_STATE_DIR", str(tmp_path / "state"))


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("justaname", "expected NAME=INSTANCE_TYPE[:VARIANT]"),
        ("qa=format", "'format' is not a SageMaker instance type"),
        ("qa=ml.c6i.xlarge:int9", "variant 'int9' is not one of fp32, int8, neuron"),
    ],
)
def test_a_malformed_endpoint_option_is_refused_first(
    option: str, fragment: str, no_aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--endpoint", option]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("sagebox: error: --endpoint ") and fragment in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ([], "AWS: Unable to locate credentials: configure credentials"),
        (["--profile", "nope"], "AWS: The config profile (nope) could not be found"),
    ],
)
def test_aws_set_up_problems_are_one_user_error_line(
    extra: list[str], fragment: str, no_aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for warmup in ("1", "0"):  # the warm-up's first request stops the run; without one, every request says why
        code = main(["bench", "--endpoint", "qa=ml.c6i.xlarge:int8", "--queries", "1", "--warmup", warmup, *extra])
        err = capsys.readouterr().err
        assert code == EXIT_USER_ERROR, err
        [line] = [line for line in err.splitlines() if line.startswith("sagebox:")]
        assert line.startswith("sagebox: error: ") and fragment in line and "internal error" not in err


def test_only_botocores_set_up_errors_are_the_users() -> None:
    from botocore.exceptions import NoRegionError, ParamValidationError

    assert aws_setup_error(NoRegionError()) == "AWS: You must specify a region.: pass --region or set AWS_REGION"
    assert aws_setup_error(ParamValidationError(report="x")) is None  # a Sagebox bug, not the user's set-up
    assert aws_setup_error(RuntimeError("NoCredentialsError")) is None
