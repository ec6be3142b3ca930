"""The emulator runtime's access profile: what each custom-op call's kernel did, per GPSIMD core.

Every expected count is worked out from the kernel's source (tests/neuron_emu/custom_op/cpp/relu_styles.cpp
and multicore.cpp) and the input, not read back from a previous run.
"""

from __future__ import annotations

import math

import pytest
import torch

from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.custom_op.profile import CallProfile, CoreCounts, by_op, profiled_libraries, recording

relu = torch.ops.nemu_relu
WINDOW_FLOATS = 4096 // 4  # a stream's TCM window
BUFFER = 1024  # the kernels' TCM buffer, in floats


@pytest.fixture
def x() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(16, 300)  # 4800 elements: not a multiple of the buffer or the window


def one_call(op: object, x: torch.Tensor) -> CallProfile:
    with recording() as calls:
        out = op(x)  # type: ignore[operator]
    assert torch.equal(out, torch.relu(x))
    [call] = calls
    return call


def test_libraries_built_here_export_the_profile(relu_styles: LoadedLibrary) -> None:
    assert "nemu_relu" in profiled_libraries()


def test_standard_accessors_count_every_element_access(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    call = one_call(relu.relu_accessor, x)
    n, positive = x.numel(), int((x > 0).sum())
    assert (call.op, call.multicore, len(call.cores)) == ("nemu_relu::relu_accessor", False, 1)
    counts = call.cores[0]
    # `t_in_acc[i][j] > 0.0 ? t_in_acc[i][j] : 0.0` reads the input once, twice where it is positive.
    assert counts.accessor_reads == n + positive
    assert counts.accessor_writes == n
    assert counts.hbm_accesses == 2 * n + positive
    assert (counts.dma_transfers, counts.dma_bytes) == (0, 0)
    assert counts.elements_computed == n


def test_tcm_transfers_count_blocks_and_bytes(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    counts = one_call(relu.relu_tcm, x).cores[0]
    n = x.numel()
    blocks = math.ceil(n / BUFFER)
    assert counts.tcm_transfers == 2 * blocks  # one in, one out per block
    assert counts.tcm_bytes == 2 * n * 4
    assert counts.tcm_elements_out == n
    assert counts.hbm_accesses == 0
    assert counts.elements_computed == n


def test_streams_count_elements_and_window_transfers(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    counts = one_call(relu.relu_stream, x).cores[0]
    n = x.numel()
    assert (counts.stream_reads, counts.stream_writes) == (n, n)
    assert counts.stream_transfers == 2 * math.ceil(n / WINDOW_FLOATS)  # refills of the read window, flushes
    assert counts.stream_bytes == 2 * n * 4
    assert counts.hbm_accesses == 0


def test_streams_without_a_tcm_window_go_straight_to_memory(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    counts = one_call(relu.relu_stream_pool_full, x).cores[0]
    n = x.numel()
    assert (counts.stream_uncached_reads, counts.stream_uncached_writes) == (n, n)
    assert (counts.stream_reads, counts.stream_transfers) == (0, 0)
    assert counts.hbm_accesses == 2 * n


def test_tensor_library_elements_and_raw_pointers(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    counts = one_call(relu.relu_library, x).cores[0]
    assert counts.library_elements == x.numel()  # torch::clamp over the whole tensor
    assert counts.data_ptr_calls == 1
    assert counts.elements_computed == x.numel()


def test_multicore_calls_profile_each_core(multicore_ops: LoadedLibrary) -> None:
    torch.manual_seed(1)
    x = torch.randn(20000)
    call = one_call(torch.ops.nemu_multicore.relu, x)
    assert call.multicore and len(call.cores) == 8
    share = x.numel() // 8  # the tutorial kernel: 7 equal partitions, the last core takes the rest
    last = x.numel() - 7 * share
    for core, counts in enumerate(call.cores):
        elements = last if core == 7 else share
        assert counts.tcm_transfers == 2 * math.ceil(elements / BUFFER)
        assert counts.tcm_bytes == 2 * elements * 4
        assert counts.tcm_elements_out == elements
    assert call.total.tcm_elements_out == x.numel()


def test_only_calls_inside_the_block_are_recorded(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    relu.relu_tcm(x)  # before: not recorded
    with recording() as outer:
        relu.relu_tcm(x)
        with recording() as inner:
            relu.relu_accessor(x)
        relu.relu_stream(x)
    relu.relu_tcm(x)  # after: not recorded
    assert [c.op for c in inner] == ["nemu_relu::relu_accessor"]
    assert [c.op for c in outer] == ["nemu_relu::relu_tcm", "nemu_relu::relu_accessor", "nemu_relu::relu_stream"]
    with recording() as later:
        pass
    assert later == []


def test_calls_accumulate_per_op(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    with recording() as calls:
        for _ in range(3):
            relu.relu_tcm(x)
        relu.relu_accessor(x)
    totals = by_op(calls)
    assert list(totals) == ["nemu_relu::relu_tcm", "nemu_relu::relu_accessor"]
    tcm = totals["nemu_relu::relu_tcm"]
    assert tcm.calls == 3
    assert tcm.total.tcm_bytes == 3 * 2 * x.numel() * 4
    assert CoreCounts.from_dict(tcm.total.to_dict()) == tcm.total


def test_call_profiles_round_trip_through_dicts(relu_styles: LoadedLibrary, x: torch.Tensor) -> None:
    call = one_call(relu.relu_stream, x)
    assert CallProfile.from_dict(call.to_dict()) == call
