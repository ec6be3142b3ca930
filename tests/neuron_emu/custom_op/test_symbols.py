from __future__ import annotations

import pytest

from neuron_emu.custom_op.symbols import FunctionSymbol, locate_kernels, parse_nm
from neuron_emu.errors import CustomOpBuildError

NM = """\
0000000000000000 T relu_forward(nemu::Tensor const&)
0000000000000100 t helper(int)
0000000000000200 T relu_forward(nemu::Tensor const&) [clone .cold]
0000000000000300 W nemu::Tensor::numel() const
0000000000000400 T ns::scaled(nemu::Tensor, double)
0000000000000500 T nemu::Tensor make<int>(int)
0000000000000600 D some_data
"""


def test_parse_nm_keeps_function_definitions() -> None:
    symbols = parse_nm(NM)
    assert FunctionSymbol("relu_forward", "(nemu::Tensor const&)", weak=False) in symbols
    assert FunctionSymbol("ns::scaled", "(nemu::Tensor, double)", weak=False) in symbols
    assert FunctionSymbol("make<int>", "(int)", weak=False) in symbols
    assert [s.name for s in symbols].count("relu_forward") == 1  # the .cold clone is not a definition
    assert "some_data" not in {s.name for s in symbols}


def test_locate_kernels() -> None:
    symbols = {"a.cpp": parse_nm(NM), "b.cpp": parse_nm("0 T other(nemu::Tensor)\n")}
    assert locate_kernels(["relu_forward", "ns::scaled", "other"], symbols) == {
        "relu_forward": "a.cpp",
        "ns::scaled": "a.cpp",
        "other": "b.cpp",
    }
    with pytest.raises(CustomOpBuildError, match="'missing' named in NEURON_LIBRARY is not defined"):
        locate_kernels(["missing"], symbols)
    overloaded = {"a.cpp": parse_nm("0 T k(nemu::Tensor)\n1 T k(nemu::Tensor, double)\n")}
    with pytest.raises(CustomOpBuildError, match="'k' is overloaded"):
        locate_kernels(["k"], overloaded)
    twice = {"a.cpp": parse_nm("0 T k(nemu::Tensor)\n"), "b.cpp": parse_nm("0 T k(nemu::Tensor)\n")}
    with pytest.raises(CustomOpBuildError, match="defined in several compute sources"):
        locate_kernels(["k"], twice)
