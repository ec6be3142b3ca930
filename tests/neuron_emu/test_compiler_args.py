from __future__ import annotations

import warnings

import pytest

from neuron_emu.compiler_args import parse_compiler_args
from neuron_emu.errors import CompilerArgsError, NeuronEmuWarning


def test_defaults_are_the_neuronx_cc_defaults() -> None:
    options = parse_compiler_args(None)
    assert (options.auto_cast, options.auto_cast_type) == ("matmult", "bf16")
    assert options.text() == "--auto-cast matmult --auto-cast-type bf16 -O2"


@pytest.mark.parametrize(
    "args",
    [
        "--auto-cast all --auto-cast-type fp16 --target trn1 -O1",
        "--auto-cast=all --auto-cast-type=fp16 --target=trn1 --optlevel=1",
        ["--auto-cast", "all", "--auto-cast-type", "fp16", "--target", "trn1", "-O1"],
        ["--auto-cast matmult", "--auto-cast all", "--auto-cast-type=fp16", "--target trn1", "--optlevel 1"],
    ],
)
def test_string_and_list_forms_later_flags_win(args: str | list[str]) -> None:
    options = parse_compiler_args(args)
    assert (options.auto_cast, options.auto_cast_type, options.target, options.optlevel) == (
        "all",
        "fp16",
        "trn1",
        1,
    )


def test_matmul_alias_and_no_effect_flags() -> None:
    options = parse_compiler_args("--auto-cast matmul --model-type transformer --enable-fast-loading-neuron-binaries")
    assert options.auto_cast == "matmult"
    assert options.model_type == "transformer"
    assert options.no_effect == ("--enable-fast-loading-neuron-binaries",)


def test_unknown_flags_warn_and_are_recorded() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = parse_compiler_args("--auto-cast none --future-flag 3")
    assert options.auto_cast == "none"
    assert options.no_effect == ("--future-flag 3",)
    assert any(issubclass(w.category, NeuronEmuWarning) for w in caught)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("--auto-cast half", "--auto-cast 'half' is not one of: none, matmult, all"),
        ("--auto-cast-type int8", "is not one of: bf16, fp16, tf32, fp8_e4m3"),
        ("--target inf1", "--target 'inf1'"),
        ("--auto-cast", "--auto-cast needs a value"),
        ("matmult", "unexpected compiler argument"),
        ("--optlevel 9", "--optlevel '9'"),
    ],
)
def test_invalid_arguments(args: str, message: str) -> None:
    with pytest.raises(CompilerArgsError, match=message):
        parse_compiler_args(args)
