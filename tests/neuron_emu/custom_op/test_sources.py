from __future__ import annotations

import pytest

from neuron_emu.custom_op.sources import check_compute_sources, parse_library, strip_comments
from neuron_emu.errors import CustomOpBuildError

SHAPES = """
#include "torchneuron/register.h"
// NEURON_LIBRARY(commented_out, m) {}
/* m.def("ghost", &x, "y"); */
NEURON_LIBRARY(my_ops, m) {
  m.def("relu_forward", &relu_fwd_shape, "relu_forward");
  m.def( "relu_backward" , relu_bwd_shape , "relu_backward" );
}
"""


def test_strip_comments_keeps_strings_and_lines() -> None:
    text = 'a // gone\n"// kept" /* gone\n too */ b'
    stripped = strip_comments(text)
    assert stripped.count("\n") == text.count("\n")
    assert '"// kept"' in stripped and "gone" not in stripped and stripped.endswith("b")


def test_parse_library_reads_the_block_and_its_registrations() -> None:
    library = parse_library({"shape.cpp": SHAPES})
    assert library.namespace == "my_ops"
    assert (library.source, library.line) == ("shape.cpp", 5)
    assert [(op.op_name, op.shape_fn, op.kernel, op.line) for op in library.ops] == [
        ("relu_forward", "relu_fwd_shape", "relu_forward", 6),
        ("relu_backward", "relu_bwd_shape", "relu_backward", 7),
    ]
    assert library.kernels == ["relu_backward", "relu_forward"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("int x;", "no NEURON_LIBRARY"),
        ("NEURON_LIBRARY(a, m) {}", 'has no m.def\\("op_name"'),
        ('NEURON_LIBRARY(a, m) { m.def(name, &f, "k"); }', "string-literal names"),
        ('NEURON_LIBRARY(a, m) { m.def("x", &f, "k"); m.def("x", &g, "k2"); }', 'op "x" is registered twice'),
        ('NEURON_LIBRARY(a, m) { m.def("bad name", &f, "k"); }', "not a C identifier"),
    ],
)
def test_parse_library_errors(text: str, message: str) -> None:
    with pytest.raises(CustomOpBuildError, match=message):
        parse_library({"s.cpp": text})


def test_compute_sources_must_not_register() -> None:
    check_compute_sources({"k.cpp": "// NEURON_LIBRARY(x, m) in a comment is fine\nint f();"})
    with pytest.raises(CustomOpBuildError, match="registrations belong in shape_srcs"):
        check_compute_sources({"k.cpp": "NEURON_LIBRARY(x, m) {}"})
