"""Streaming accessors: moving an open stream, reading past its end, writing after close()."""

from __future__ import annotations

import pytest
import torch

from neuron_emu import custom_op
from neuron_emu.custom_op import LoadedLibrary
from tests.neuron_emu.conftest import CPP


@pytest.fixture(scope="module")
def stream_ops() -> LoadedLibrary:
    path = custom_op.load("nemu_streams", [CPP / "streams.cpp"], [CPP / "streams_shapes.cpp"])
    return custom_op.load_library(path)


def test_moved_streams_keep_their_cursor_and_cached_writes(stream_ops: LoadedLibrary) -> None:
    x = torch.randn(5000)  # longer than one 4 KB window: the move happens with writes still cached
    assert torch.equal(torch.ops.nemu_streams.stream_moves(x), x)


def test_reading_past_the_end_is_an_error(stream_ops: LoadedLibrary) -> None:
    with pytest.raises(RuntimeError, match=r"read\(\) past the end of the stream \(6 elements\)"):
        torch.ops.nemu_streams.stream_misuse(torch.zeros(6), 0)


def test_writing_after_close_is_an_error(stream_ops: LoadedLibrary) -> None:
    with pytest.raises(RuntimeError, match=r"TensorWriteStreamAccessor::write\(\) on a closed stream"):
        torch.ops.nemu_streams.stream_misuse(torch.zeros(6), 1)
