"""multicore=True: the kernel runs on 8 emulated GPSIMD cores writing disjoint slices of get_dst_tensor()."""

from __future__ import annotations

import pytest
import torch

from neuron_emu.custom_op import LoadedLibrary

ops = torch.ops.nemu_multicore


def test_library_is_multicore(multicore_ops: LoadedLibrary) -> None:
    assert multicore_ops.multicore is True


def test_every_core_runs_the_kernel_with_its_id(multicore_ops: LoadedLibrary) -> None:
    out = ops.core_map(torch.zeros(1))
    assert out.tolist() == [i * 100 + 8 for i in range(8)]


@pytest.mark.parametrize("numel", [8, 1000, 8 * 1024 + 5, 40000])
def test_tutorial_multicore_relu_partitions_the_tensor(multicore_ops: LoadedLibrary, numel: int) -> None:
    x = torch.randn(numel)
    assert torch.equal(ops.relu(x), torch.relu(x))


def test_standard_accessors_are_refused_on_multiple_cores(multicore_ops: LoadedLibrary) -> None:
    with pytest.raises(RuntimeError, match=r"GPSIMD core \d: accessor\(\): in multicore mode tensors may only"):
        ops.plain_accessor(torch.zeros(4))
