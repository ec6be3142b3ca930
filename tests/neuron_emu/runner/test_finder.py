"""The stand-in modules exist only inside shim_imports(): nothing stays in sys.modules or sys.meta_path."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

import pytest

from neuron_emu import shims
from neuron_emu.runner.finder import ShimFinder, shim_imports


def _shim_entries() -> list[str]:
    return [name for name in sys.modules if name.split(".", 1)[0] in ("torch_neuronx", "torch_xla")]


def _assert_clean() -> None:
    assert _shim_entries() == []
    assert not any(isinstance(finder, ShimFinder) for finder in sys.meta_path)


def test_the_real_packages_are_not_installed_here() -> None:
    # So every import of these names in the suite reaches the stand-ins only through the runner.
    _assert_clean()
    assert importlib.util.find_spec("torch_neuronx") is None
    assert importlib.util.find_spec("torch_xla") is None
    with pytest.raises(ImportError):
        import torch_neuronx  # noqa: F401


@pytest.mark.parametrize("name", shims.provided_modules())
def test_every_stand_in_imports_from_the_shim_folder_and_says_it_is_a_stand_in(name: str) -> None:
    with shim_imports():
        module = importlib.import_module(name)
        assert module.__name__ == name
        assert module.__file__ is not None
        assert module.__file__.startswith(str(shims.SHIM_ROOT))
        assert module.__doc__ is not None
        assert "Stand-in for" in module.__doc__ and "provided by neuron_emu" in module.__doc__
        assert "not " in module.__doc__.split("\n", 1)[0]  # "(not AWS's package)" / "(not Google's or AWS's ...)"
    _assert_clean()


def test_tutorial_imports_resolve_inside_and_vanish_after() -> None:
    with shim_imports():
        import torch_neuronx
        import torch_xla.core.xla_model as xm
        from torch_neuronx.xla_impl import custom_op

        assert callable(torch_neuronx.trace)
        assert callable(custom_op.load) and callable(custom_op.load_library)
        assert xm.xla_device().type == "cpu"
        assert "torch_xla.core.xla_model" in sys.modules
    _assert_clean()
    with pytest.raises(ImportError):
        importlib.import_module("torch_xla.core.xla_model")


def test_each_run_gets_fresh_modules() -> None:
    with shim_imports():
        first = importlib.import_module("torch_xla.core.xla_model")
        first.add_step_closure(print)
    with shim_imports():
        second = importlib.import_module("torch_xla.core.xla_model")
        assert second is not first
        assert second._STEP_CLOSURES == []


@pytest.mark.parametrize(
    ("name", "missing"),
    [
        ("torch_xla.distributed.xla_multiprocessing", "torch_xla.distributed.xla_multiprocessing"),
        ("torch_neuronx.xla_impl.ops", "torch_neuronx.xla_impl.ops"),
        ("torch_xla.debug.metrics", "torch_xla.debug"),  # the first package on the way that is not emulated
    ],
)
def test_names_not_emulated_fail_with_one_line_naming_them(name: str, missing: str) -> None:
    with shim_imports(), pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module(name)
    message = str(caught.value)
    assert message.startswith(f"{missing} is not emulated by neuron_emu (its stand-ins: torch_neuronx, ")
    assert "\n" not in message
    assert caught.value.name == missing
    _assert_clean()


def test_other_imports_are_not_touched() -> None:
    finder = ShimFinder()
    assert finder.find_spec("json") is None
    assert finder.find_spec("torch_xlax") is None  # only the exact packages and their submodules


def test_a_module_already_imported_under_a_shimmed_name_is_set_aside_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = ModuleType("torch_xla")  # stands for a real torch_xla imported before the run
    monkeypatch.setitem(sys.modules, "torch_xla", real)
    with shim_imports():
        inside = importlib.import_module("torch_xla")
        assert inside is not real
        assert inside.__file__ is not None and inside.__file__.startswith(str(shims.SHIM_ROOT))
    assert sys.modules["torch_xla"] is real
    assert [name for name in _shim_entries() if name != "torch_xla"] == []


def test_cleanup_happens_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError, match="script failed"), shim_imports():
        importlib.import_module("torch_xla.runtime")
        raise RuntimeError("script failed")
    _assert_clean()


def test_cleanup_happens_on_system_exit() -> None:
    with pytest.raises(SystemExit), shim_imports():
        importlib.import_module("torch_neuronx.xla_impl.custom_op")
        raise SystemExit(3)
    _assert_clean()
