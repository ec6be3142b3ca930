"""Building unmodified Neuron custom-op sources and calling the ops through torch.ops."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from neuron_emu import custom_op
from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.custom_op.build import plan_build
from neuron_emu.errors import CustomOpLoadError
from tests.neuron_emu.conftest import CPP, run_python

ops = torch.ops.nemu_test


def test_library_registers_its_namespace_and_ops(test_ops: LoadedLibrary) -> None:
    assert test_ops.namespace == "nemu_test"
    assert test_ops.multicore is False
    assert set(test_ops.ops) == {
        "relu_forward",
        "relu_backward",
        "scale_add",
        "tcm_negate",
        "tensor_math",
        "bf16_double",
        "kernel_calls",
        "tcm_alloc",
        "incoherent",
        "dst_single",
    }
    assert str(ops.scale_add.default._schema) == (
        "nemu_test::scale_add(Tensor arg0, Tensor arg1, float arg2, int arg3, Scalar arg4) -> Tensor"
    )


def test_accessor_kernel_matches_torch_relu_and_takes_the_shape_function_shape(
    test_ops: LoadedLibrary,
) -> None:
    x = torch.randn(7, 5)
    out = ops.relu_forward(x)
    # The kernel returns a flat tensor; like the hardware, the output has the shape function's shape.
    assert out.shape == (7, 5)
    assert torch.equal(out, torch.relu(x))


def test_stream_accessors_compute_relu_backward(test_ops: LoadedLibrary) -> None:
    x, grad = torch.randn(3, 2000), torch.randn(3, 2000)  # longer than one 4 KB stream window
    assert torch.equal(ops.relu_backward(grad, x), torch.where(x > 0, grad, torch.zeros_like(grad)))


def test_scalar_arguments_of_every_kind(test_ops: LoadedLibrary) -> None:
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    out = ops.scale_add(a, b, 0.5, 3, 2)
    assert torch.allclose(out, a * 0.5 + b * 2 + 3)
    out = ops.scale_add(a, b, -1.0, 0, 0.25)
    assert torch.allclose(out, -a + b * 0.25)


def test_tcm_accessor_kernel_negates_in_1024_element_chunks(test_ops: LoadedLibrary) -> None:
    x = torch.randn(5000)
    assert torch.equal(ops.tcm_negate(x), -x)


def test_documented_tensor_library_ops(test_ops: LoadedLibrary) -> None:
    x = torch.linspace(-3, 3, 61)
    expected = torch.clamp(torch.exp(x) * 2 - x / 4 + x**2, -5, 5)
    assert torch.allclose(ops.tensor_math(x), expected, atol=1e-5)


def test_bfloat16_inputs_are_read_as_bfloat16(test_ops: LoadedLibrary) -> None:
    x = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    assert torch.equal(ops.bf16_double(x), (x.float() * 2))


def test_tcm_pool_holds_16_kib(test_ops: LoadedLibrary) -> None:
    x = torch.zeros(1)
    assert ops.tcm_alloc(x, 16384).item() == 1
    assert ops.tcm_alloc(x, 16385).item() == 0


def test_get_dst_tensor_in_single_core_mode_replaces_the_return_value(test_ops: LoadedLibrary) -> None:
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(ops.dst_single(x), x + 1)


def test_inputs_are_not_modified_and_noncontiguous_inputs_work(test_ops: LoadedLibrary) -> None:
    x = torch.randn(5, 4)
    before = x.clone()
    out = ops.relu_forward(x.t())
    assert torch.equal(out, torch.relu(x.t()))
    assert torch.equal(x, before)


def test_second_load_in_a_new_process_uses_the_cache_without_compiling(test_ops: LoadedLibrary, tmp_path: Path) -> None:
    log = tmp_path / "compiler.log"
    wrapper = tmp_path / "g++"
    real = shutil.which("g++")
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    out = run_python(
        f"""
        import time, json
        from neuron_emu import custom_op
        import torch
        start = time.perf_counter()
        path = custom_op.load("nemu_test", [{str(CPP / "kernels.cpp")!r}], [{str(CPP / "shapes.cpp")!r}])
        loaded = time.perf_counter()
        x = torch.tensor([[-1.0, 2.0]])
        print(json.dumps({{"load_s": loaded - start, "out": torch.ops.nemu_test.relu_forward(x).tolist()}}))
        """,
        env={"CXX": str(wrapper)},
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["out"] == [[0.0, 2.0]]
    assert log.read_text().split() == ["--version"]  # identified the compiler, compiled nothing


def test_build_directory_holds_the_library_for_load_library_elsewhere(test_ops: LoadedLibrary, tmp_path: Path) -> None:
    published = custom_op.load("nemu_test", [CPP / "kernels.cpp"], [CPP / "shapes.cpp"], build_directory=tmp_path)
    assert published == tmp_path / "libnemu_test.so"
    out = run_python(
        f"""
        import torch
        from neuron_emu import custom_op
        lib = custom_op.load_library({str(published)!r})
        print(lib.namespace, torch.ops.nemu_test.tcm_negate(torch.tensor([1.0, -2.0])).tolist())
        """
    )
    assert out.strip() == "nemu_test [-1.0, 2.0]"


def test_cache_key_follows_sources_and_neighbour_headers(tmp_path: Path) -> None:
    shutil.copy(CPP / "kernels.cpp", tmp_path / "kernels.cpp")
    shutil.copy(CPP / "shapes.cpp", tmp_path / "shapes.cpp")
    first = plan_build("keyed", [tmp_path / "kernels.cpp"], [tmp_path / "shapes.cpp"], False, None).key
    assert plan_build("keyed", [tmp_path / "kernels.cpp"], [tmp_path / "shapes.cpp"], False, None).key == first
    (tmp_path / "helpers.h").write_text("// a header next to the sources\n")
    with_header = plan_build("keyed", [tmp_path / "kernels.cpp"], [tmp_path / "shapes.cpp"], False, None).key
    assert with_header != first
    assert plan_build("keyed", [tmp_path / "kernels.cpp"], [tmp_path / "shapes.cpp"], True, None).key != with_header
    flagged = plan_build("keyed", [tmp_path / "kernels.cpp"], [tmp_path / "shapes.cpp"], False, ["-DSTACK_SIZE=20000"])
    assert flagged.key != with_header


def test_loading_the_same_library_twice_is_a_noop(test_ops: LoadedLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: opened.append(str(path)))
    again = custom_op.load_library(test_ops.path)
    assert again == test_ops
    assert opened == []  # not opened (dlopen) nor registered again


def test_load_library_refuses_files_that_are_not_neuron_emu_libraries(tmp_path: Path) -> None:
    with pytest.raises(CustomOpLoadError, match="does not exist"):
        custom_op.load_library(tmp_path / "libmissing.so")
    bogus = tmp_path / "libbogus.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(CustomOpLoadError, match=r"cannot load libbogus\.so"):
        custom_op.load_library(bogus)
