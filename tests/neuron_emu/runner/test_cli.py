"""`python -m neuron_emu run SCRIPT.py [ARGS]`: the script's status and traceback; one-line usage errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neuron_emu.__main__ import main

REPO = Path(__file__).resolve().parents[3]


def one_line(text: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_usage_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert (
        one_line(capsys.readouterr().err)
        == f"python -m neuron_emu run: error: script {tmp_path}/nope.py does not exist"
    )
    assert main(["run", str(tmp_path)]) == 2
    assert one_line(capsys.readouterr().err).endswith("is not a file")
    for argv in ([], ["run"], ["bogus"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
        assert "error:" in one_line(capsys.readouterr().err)


def test_required_arguments_name_only_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run"])
    assert "required: script (see" in capsys.readouterr().err


def test_arguments_after_the_script_go_to_the_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "args.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    assert main(["run", str(script), "--help", "-x", "run"]) == 0
    assert capsys.readouterr().out == "['--help', '-x', 'run']\n"


def test_a_script_error_prints_the_scripts_traceback_and_gives_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import torch_xla.core.xla_model as xm\nxm.all_to_all()\n")
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):"
    assert err[1] == f'  File "{script}", line 2, in <module>'
    assert err[-1].startswith("neuron_emu.shims.NotEmulatedError: torch_xla.core.xla_model.all_to_all is not provided")
    assert not any("runpy" in line or "neuron_emu/runner" in line for line in err)


def test_a_syntax_error_prints_only_the_error_like_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "syntax.py"
    script.write_text("x = (\n")
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f'  File "{script}", line 1'
    assert err[-1] == "SyntaxError: '(' was never closed"
    assert not any("runpy" in line or "Traceback" in line for line in err)


def test_the_command_line_exits_with_the_scripts_status(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            import torch_xla.core.xla_model as xm
            device = 'xla'
            x = torch.ones(2, device=device) * 3
            xm.mark_step()
            print(sys.argv[1:], x.device, x.tolist())
            sys.exit(int(sys.argv[1]))
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "neuron_emu", "run", str(script), "5", "--epochs"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 5, result.stderr
    assert result.stdout == "['5', '--epochs'] cpu [3.0, 3.0]\n"
