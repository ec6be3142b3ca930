"""Every documented Neuron custom-op limit fails with one clear line, at build, load or call time."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from neuron_emu import custom_op
from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.errors import CustomOpBuildError, CustomOpLoadError

HEADER = "#include <torch/torch.h>\n"
SHAPE_HEADER = '#include <torch/torch.h>\n#include "torchneuron/register.h"\n'


def write_sources(directory: Path, kernels: str, shapes: str) -> tuple[Path, Path]:
    compute = directory / "kernels.cpp"
    shape = directory / "shapes.cpp"
    compute.write_text(HEADER + textwrap.dedent(kernels))
    shape.write_text(SHAPE_HEADER + textwrap.dedent(shapes))
    return compute, shape


def build_error(directory: Path, name: str, kernels: str, shapes: str) -> str:
    compute, shape = write_sources(directory, kernels, shapes)
    with pytest.raises(CustomOpBuildError) as info:
        custom_op.load(name, [compute], [shape])
    message = str(info.value)
    assert "\n" not in message
    return message


IDENTITY_KERNEL = """
torch::Tensor identity(const torch::Tensor& t) {
  torch::Tensor out = torch::empty(t.sizes(), torch::kFloat);
  return out;
}
"""
IDENTITY_SHAPE = "torch::Tensor identity_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }\n"


def test_at_most_ten_functions_per_library(tmp_path: Path) -> None:
    defs = "\n".join(f'  m.def("op{i}", &identity_shape, "identity");' for i in range(11))
    message = build_error(
        tmp_path, "eleven", IDENTITY_KERNEL, IDENTITY_SHAPE + f"NEURON_LIBRARY(eleven, m) {{\n{defs}\n}}\n"
    )
    assert "registers 11 functions" in message
    assert "at most 10" in message


def test_library_name_builtin_is_refused(tmp_path: Path) -> None:
    shapes = IDENTITY_SHAPE + 'NEURON_LIBRARY(builtin, m) { m.def("identity", &identity_shape, "identity"); }\n'
    assert "'builtin' is reserved" in build_error(tmp_path, "builtin_lib", IDENTITY_KERNEL, shapes)


def test_vector_arguments_are_refused(tmp_path: Path) -> None:
    kernels = """
    #include <vector>
    torch::Tensor pick(const torch::Tensor& t, std::vector<int64_t> idx) {
      return torch::empty(t.sizes(), torch::kFloat);
    }
    """
    shapes = """
    #include <vector>
    torch::Tensor pick_shape(torch::Tensor t, std::vector<int64_t> idx) {
      return torch::zeros(t.sizes(), torch::kFloat);
    }
    NEURON_LIBRARY(vec_ops, m) { m.def("pick", &pick_shape, "pick"); }
    """
    message = build_error(tmp_path, "vec_ops", kernels, shapes)
    assert "shapes.cpp" in message
    assert "arguments must be torch::Tensor, torch::Scalar, double or int64_t" in message


def test_float_and_int_scalars_are_refused_in_kernels(tmp_path: Path) -> None:
    kernels = """
    torch::Tensor scale(const torch::Tensor& t, float f) { return torch::empty(t.sizes(), torch::kFloat); }
    """
    shapes = """
    torch::Tensor scale_shape(torch::Tensor t, double f) { return torch::zeros(t.sizes(), torch::kFloat); }
    NEURON_LIBRARY(float_ops, m) { m.def("scale", &scale_shape, "scale"); }
    """
    message = build_error(tmp_path, "float_ops", kernels, shapes)
    assert "kernels.cpp (kernels scale)" in message
    assert "kernel arguments must be torch::Tensor, torch::Scalar, double or int64_t" in message


def test_one_tensor_is_returned(tmp_path: Path) -> None:
    kernels = """
    #include <tuple>
    std::tuple<torch::Tensor, torch::Tensor> split(const torch::Tensor& t) {
      return {torch::empty(t.sizes(), torch::kFloat), torch::empty(t.sizes(), torch::kFloat)};
    }
    """
    shapes = """
    #include <tuple>
    std::tuple<torch::Tensor, torch::Tensor> split_shape(torch::Tensor t) {
      return {torch::zeros(t.sizes(), torch::kFloat), torch::zeros(t.sizes(), torch::kFloat)};
    }
    NEURON_LIBRARY(tuple_ops, m) { m.def("split", &split_shape, "split"); }
    """
    assert "must return exactly one torch::Tensor" in build_error(tmp_path, "tuple_ops", kernels, shapes)


def test_unsupported_dtypes_fail_the_build(tmp_path: Path) -> None:
    kernels = "torch::Tensor widen(const torch::Tensor& t) { return torch::zeros(t.sizes(), torch::kDouble); }\n"
    shapes = """
    torch::Tensor widen_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
    NEURON_LIBRARY(wide_ops, m) { m.def("widen", &widen_shape, "widen"); }
    """
    assert "not a NeuronCore custom-op dtype" in build_error(tmp_path, "wide_ops", kernels, shapes)
    kernels = """
    torch::Tensor readd(const torch::Tensor& t) {
      auto acc = t.accessor<double, 1>();
      return torch::zeros(t.sizes(), torch::kFloat);
    }
    """
    shapes = """
    torch::Tensor readd_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
    NEURON_LIBRARY(acc_ops, m) { m.def("readd", &readd_shape, "readd"); }
    """
    assert "(no double or int64_t tensors)" in build_error(tmp_path, "acc_ops", kernels, shapes)


def test_unsupported_input_dtype_fails_the_call(test_ops: LoadedLibrary) -> None:
    with pytest.raises(RuntimeError, match=r"nemu_test::tcm_negate: argument 0 has dtype torch.float64"):
        torch.ops.nemu_test.tcm_negate(torch.zeros(4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"argument 0 has dtype torch.int64"):
        torch.ops.nemu_test.tcm_negate(torch.zeros(4, dtype=torch.int64))


def test_tensor_rank_and_dimension_limits(test_ops: LoadedLibrary) -> None:
    with pytest.raises(RuntimeError, match="has 9 dimensions; NeuronCore custom-op tensors have at most 8"):
        torch.ops.nemu_test.tcm_negate(torch.zeros([1] * 9))
    with pytest.raises(RuntimeError, match=r"has size 65536 in dimension 0; .* at most 65535"):
        torch.ops.nemu_test.tcm_negate(torch.zeros(65536))
    assert torch.ops.nemu_test.tcm_negate(torch.ones([1] * 8)).shape == (1,) * 8


def test_tcm_pool_overflow_is_reported_when_the_null_buffer_is_used(test_ops: LoadedLibrary) -> None:
    with pytest.raises(RuntimeError, match=r"the TCM buffer is null .*16384-byte TCM pool"):
        torch.ops.nemu_test.tcm_alloc(torch.zeros(4), -1)


def test_incoherent_stream_and_accessor_use_is_an_error(test_ops: LoadedLibrary) -> None:
    with pytest.raises(
        RuntimeError, match="incoherent tensor access: accessor\\(\\) on a tensor with an open write stream"
    ):
        torch.ops.nemu_test.incoherent(torch.zeros(4))


def test_kernel_named_in_neuron_library_must_exist(tmp_path: Path) -> None:
    shapes = (
        IDENTITY_SHAPE + 'NEURON_LIBRARY(missing_ops, m) { m.def("identity", &identity_shape, "identity_kernel"); }\n'
    )
    message = build_error(tmp_path, "missing_ops", IDENTITY_KERNEL, shapes)
    assert "'identity_kernel' named in NEURON_LIBRARY is not defined in compute_srcs" in message


def test_exactly_one_neuron_library_and_only_in_shape_sources(tmp_path: Path) -> None:
    shapes = (
        IDENTITY_SHAPE
        + 'NEURON_LIBRARY(lib_a, m) { m.def("a", &identity_shape, "identity"); }\n'
        + 'NEURON_LIBRARY(lib_b, n) { n.def("b", &identity_shape, "identity"); }\n'
    )
    assert "define 2 NEURON_LIBRARY blocks" in build_error(tmp_path, "two_libs", IDENTITY_KERNEL, shapes)
    kernels = IDENTITY_KERNEL + 'NEURON_LIBRARY(lib_c, m) { m.def("c", &identity_shape, "identity"); }\n'
    shapes = IDENTITY_SHAPE + 'NEURON_LIBRARY(lib_c, m) { m.def("c", &identity_shape, "identity"); }\n'
    assert "registrations belong in shape_srcs" in build_error(tmp_path, "compute_lib", kernels, shapes)


def test_kernel_and_shape_function_must_take_the_same_arguments(tmp_path: Path) -> None:
    kernels = """
    torch::Tensor scaled(const torch::Tensor& t, double s) { return torch::empty(t.sizes(), torch::kFloat); }
    """
    shapes = IDENTITY_SHAPE + 'NEURON_LIBRARY(mismatch_ops, m) { m.def("scaled", &identity_shape, "scaled"); }\n'
    compute, shape = write_sources(tmp_path, kernels, shapes)
    with pytest.raises(CustomOpLoadError, match=r"kernel scaled\(Tensor, double\) and its shape function\(Tensor\)"):
        custom_op.load("mismatch_ops", [compute], [shape])


def test_kernel_returning_the_wrong_size_is_caught_at_call(tmp_path: Path) -> None:
    kernels = "torch::Tensor shrink(const torch::Tensor& t) { return torch::zeros({1}, torch::kFloat); }\n"
    shapes = IDENTITY_SHAPE + 'NEURON_LIBRARY(shrink_ops, m) { m.def("shrink", &identity_shape, "shrink"); }\n'
    compute, shape = write_sources(tmp_path, kernels, shapes)
    custom_op.load("shrink_ops", [compute], [shape])
    with pytest.raises(RuntimeError, match=r"returned 1 elements \[1\] but the shape function declares 6 \[2, 3\]"):
        torch.ops.shrink_ops.shrink(torch.zeros(2, 3))


def test_compile_errors_name_the_file_and_line(tmp_path: Path) -> None:
    kernels = "torch::Tensor broken(const torch::Tensor& t) { return undefined_thing(t); }\n"
    shapes = IDENTITY_SHAPE + 'NEURON_LIBRARY(broken_ops, m) { m.def("broken", &identity_shape, "broken"); }\n'
    message = build_error(tmp_path, "broken_ops", kernels, shapes)
    assert "kernels.cpp:2: 'undefined_thing' was not declared" in message
    assert "full log:" in message


def test_source_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(CustomOpBuildError, match=r"compute_srcs file .*nope\.cpp does not exist"):
        custom_op.load("nope", [tmp_path / "nope.cpp"], [tmp_path / "nope_shape.cpp"])
    with pytest.raises(CustomOpBuildError, match="must be a non-empty list"):
        custom_op.load("nope", "kernels.cpp", ["shapes.cpp"])
    with pytest.raises(CustomOpBuildError, match="library name"):
        custom_op.load("../evil", ["a.cpp"], ["b.cpp"])
