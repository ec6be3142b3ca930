"""run_script: a torch-neuronx script runs unchanged as `__main__`, and the process is as before afterwards."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from neuron_emu.runner import RunnerError, ShimFinder, run_script, script_traceback


def write(folder: Path, name: str, code: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(code))
    return path


@pytest.fixture
def process_state() -> Iterator[None]:
    """Asserts that the test leaves argv, sys.path, sys.modules, meta_path and torch's mode stack as it found them."""
    argv, path, modes = list(sys.argv), list(sys.path), torch._C._len_torch_function_stack()
    meta_path = list(sys.meta_path)
    yield
    assert sys.argv == argv
    assert sys.path == path
    assert sys.meta_path == meta_path
    assert not any(isinstance(finder, ShimFinder) for finder in sys.meta_path)
    assert [name for name in sys.modules if name.split(".")[0] in ("torch_neuronx", "torch_xla")] == []
    assert torch._C._len_torch_function_stack() == modes
    with pytest.raises(RuntimeError):
        torch.zeros(1, device="xla")  # the device mapping is gone too


TRAIN_STEP = """
    import json, sys
    import torch
    import torch_neuronx
    import torch_xla
    import torch_xla.core.xla_model as xm

    out = sys.argv[1]
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    device = {device}
    model = model.to(device)
    x = x.to(device)
    bias = torch.zeros(2, device=device)
    loss = (model(x) + bias).pow(2).mean()
    loss.backward()
    xm.mark_step()
    json.dump({{"loss": loss.item(), "devices": sorted({{str(t.device) for t in (x, bias, model.weight)}}),
               "device": str(device)}}, open(out, "w"))
"""


def cpu_loss() -> float:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    return float((model(x) + torch.zeros(2)).pow(2).mean().item())


@pytest.mark.parametrize(
    ("device", "shown"),
    [
        ("'xla'", "xla"),  # a string stays as the script wrote it; tensors moved there land on the CPU
        ("'xla:0'", "xla:0"),
        ("xm.xla_device()", "cpu"),
        ("torch_xla.device()", "cpu"),
        ("torch.device('xla')", "cpu"),  # constructed inside the run: the CPU device
    ],
)
def test_device_patterns_run_on_the_cpu_with_cpu_results(
    tmp_path: Path, process_state: None, device: str, shown: str
) -> None:
    script = write(tmp_path, "step.py", TRAIN_STEP.format(device=device))
    out = tmp_path / "out.json"
    assert run_script(script, [str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["devices"] == ["cpu"]
    assert result["device"] == shown
    assert result["loss"] == cpu_loss()


def test_main_semantics_argv_and_the_scripts_folder_on_sys_path(tmp_path: Path, process_state: None) -> None:
    write(tmp_path, "helper_mod_for_runner_test.py", "VALUE = 41\n")
    script = write(
        tmp_path,
        "main.py",
        """
        import json, sys
        import helper_mod_for_runner_test
        if __name__ == "__main__":
            json.dump({"argv": sys.argv, "path0": sys.path[0], "value": helper_mod_for_runner_test.VALUE + 1,
                       "file": __file__}, open(sys.argv[2], "w"))
        """,
    )
    out = tmp_path / "out.json"
    assert run_script(script, ["--flag", str(out)]) == 0
    seen = json.loads(out.read_text())
    assert seen["argv"] == [str(script), "--flag", str(out)]
    assert seen["path0"] == str(tmp_path)
    assert seen["value"] == 42
    assert seen["file"] == str(script)
    assert "helper_mod_for_runner_test" not in sys.modules  # the script's own modules leave with it


@pytest.mark.parametrize(
    ("code", "status"), [("sys.exit()", 0), ("sys.exit(3)", 3), ("sys.exit(False)", 0), ("pass", 0)]
)
def test_exit_status_is_the_scripts(tmp_path: Path, process_state: None, code: str, status: int) -> None:
    script = write(tmp_path, "exit.py", f"import sys\nimport torch_xla\n{code}\n")
    assert run_script(script) == status


def test_exit_with_a_message_prints_it_and_gives_1(
    tmp_path: Path, process_state: None, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(tmp_path, "exit.py", "import sys\nsys.exit('stopped early')\n")
    assert run_script(script) == 1
    assert capsys.readouterr().err == "stopped early\n"


def test_a_script_error_propagates_after_cleanup(tmp_path: Path, process_state: None) -> None:
    write(tmp_path, "helper_mod_for_runner_error.py", "import torch_neuronx\n")
    script = write(
        tmp_path,
        "fails.py",
        """
        import helper_mod_for_runner_error
        import torch_xla.core.xla_model as xm

        def step():
            raise ValueError("bad batch")

        step()
        """,
    )
    with pytest.raises(ValueError, match="bad batch") as caught:
        run_script(script)
    assert "helper_mod_for_runner_error" not in sys.modules
    text = script_traceback(caught.value, script)
    first_frame = text.splitlines()[1]
    assert first_frame.startswith(f'  File "{script}", line 8, in <module>')
    assert "runpy" not in text and "neuron_emu/runner" not in text
    assert text.rstrip().endswith("ValueError: bad batch")


def test_a_script_importing_something_not_emulated_gets_one_line(tmp_path: Path, process_state: None) -> None:
    script = write(tmp_path, "xmp.py", "import torch_xla.distributed.xla_multiprocessing as xmp\n")
    with pytest.raises(ModuleNotFoundError, match=r"^torch_xla.distributed.xla_multiprocessing is not emulated"):
        run_script(script)


def test_a_real_package_of_the_scripts_folder_does_not_leak(tmp_path: Path, process_state: None) -> None:
    package = tmp_path / "pkg_for_runner_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "inner.py").write_text("X = 1\n")
    script = write(tmp_path, "uses_pkg.py", "import pkg_for_runner_test.inner\nimport json\n")
    assert run_script(script) == 0
    assert not any(name.startswith("pkg_for_runner_test") for name in sys.modules)
    assert "json" in sys.modules  # modules from elsewhere stay imported


def test_missing_script_is_a_runner_error(tmp_path: Path) -> None:
    with pytest.raises(RunnerError, match=r"script .*nope.py does not exist"):
        run_script(tmp_path / "nope.py")
    with pytest.raises(RunnerError, match="is not a file"):
        run_script(tmp_path)
