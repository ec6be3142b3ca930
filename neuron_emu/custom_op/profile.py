"""What custom-op kernels did to memory: the emulator runtime's per-call, per-GPSIMD-core access profile.

Each emulated core counts, as its kernel runs, element accesses through standard accessors, stream reads and
writes (and the window transfers behind them), TCM transfers and their bytes, and elements the torch:: tensor
library computed. While `recording()` is active every successful call of every loaded neuron_emu library is
logged with those counters, one set per core (8 in multicore mode). The cost model (neuron_emu.cost.kernels)
prices them.

These are counts of what the kernel did in the emulator, not timings: the kernels run on the host CPU.
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from neuron_emu.custom_op.library import loaded_libraries

PROFILE_VERSION = 1


@dataclass(frozen=True)
class CoreCounts:
    """One GPSIMD core's counters for one call (or a sum of them); field names match runtime.cpp's CoreProfile."""

    accessor_reads: int = 0
    accessor_writes: int = 0
    stream_reads: int = 0
    stream_writes: int = 0
    stream_uncached_reads: int = 0
    stream_uncached_writes: int = 0
    stream_transfers: int = 0
    stream_bytes: int = 0
    tcm_transfers: int = 0
    tcm_bytes: int = 0
    tcm_elements_out: int = 0
    library_elements: int = 0
    data_ptr_calls: int = 0

    @property
    def hbm_accesses(self) -> int:
        """Element-by-element accesses to NeuronCore memory: standard accessors and streams without a window."""
        return self.accessor_reads + self.accessor_writes + self.stream_uncached_reads + self.stream_uncached_writes

    @property
    def dma_transfers(self) -> int:
        """Block transfers between NeuronCore memory and TCM: tensor_to_tcm/tcm_to_tensor and stream windows."""
        return self.tcm_transfers + self.stream_transfers

    @property
    def dma_bytes(self) -> int:
        return self.tcm_bytes + self.stream_bytes

    @property
    def elements_computed(self) -> int:
        """An approximation: the elements the kernel wrote (accessor writes, stream writes, TCM-to-tensor
        elements) plus those the torch:: tensor library computed. The emulator sees no arithmetic."""
        return (
            self.accessor_writes
            + self.stream_writes
            + self.stream_uncached_writes
            + self.tcm_elements_out
            + self.library_elements
        )

    def __add__(self, other: CoreCounts) -> CoreCounts:
        return CoreCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CoreCounts:
        names = {f.name for f in fields(cls)}
        return cls(**{name: int(value) for name, value in raw.items() if name in names})


def total(counts: Sequence[CoreCounts]) -> CoreCounts:
    out = CoreCounts()
    for item in counts:
        out = out + item
    return out


@dataclass(frozen=True)
class CallProfile:
    """One custom-op call: its op (`namespace::name`) and one CoreCounts per GPSIMD core that ran it."""

    op: str
    multicore: bool
    cores: tuple[CoreCounts, ...]

    @property
    def total(self) -> CoreCounts:
        return total(self.cores)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "multicore": self.multicore, "cores": [c.to_dict() for c in self.cores]}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CallProfile:
        return cls(
            op=str(raw["op"]),
            multicore=bool(raw["multicore"]),
            cores=tuple(CoreCounts.from_dict(c) for c in raw["cores"]),
        )


@dataclass(frozen=True)
class OpProfile:
    """Calls of one op accumulated: per-core sums (core i of every call added together)."""

    op: str
    calls: int
    cores: tuple[CoreCounts, ...]

    @property
    def total(self) -> CoreCounts:
        return total(self.cores)


def by_op(calls: Sequence[CallProfile]) -> dict[str, OpProfile]:
    """Accumulate calls per op, in order of first call."""
    out: dict[str, OpProfile] = {}
    for call in calls:
        known = out.get(call.op)
        if known is None:
            out[call.op] = OpProfile(call.op, 1, call.cores)
            continue
        width = max(len(known.cores), len(call.cores))
        padded = [known.cores[i] if i < len(known.cores) else CoreCounts() for i in range(width)]
        summed = tuple(padded[i] + call.cores[i] if i < len(call.cores) else padded[i] for i in range(width))
        out[call.op] = OpProfile(call.op, known.calls + 1, summed)
    return out


class _Handles:
    """ctypes handles of the loaded libraries that export the profile API (older builds do not)."""

    def __init__(self) -> None:
        self._by_path: dict[Path, Any] = {}

    def profiled(self, path: Path) -> bool:
        return self._by_path.get(path) is not None

    def all(self) -> list[Any]:
        handles = []
        for library in loaded_libraries().values():
            if library.path not in self._by_path:
                handle = ctypes.CDLL(str(library.path))  # already loaded by torch: dlopen returns it again
                record = getattr(handle, "nemu_profile_record", None)
                dump = getattr(handle, "nemu_profile_json", None)
                if record is None or dump is None:
                    self._by_path[library.path] = None
                    continue
                record.argtypes, record.restype = [ctypes.c_int], None
                dump.argtypes, dump.restype = [ctypes.c_int], ctypes.c_char_p
                self._by_path[library.path] = handle
            if self._by_path[library.path] is not None:
                handles.append(self._by_path[library.path])
        return handles


_LOCK = threading.Lock()
_HANDLES = _Handles()
_ACTIVE: list[list[CallProfile]] = []


def _drain(handles: Sequence[Any]) -> list[CallProfile]:
    calls: list[CallProfile] = []
    for handle in handles:
        raw = json.loads((handle.nemu_profile_json(1) or b"{}").decode("utf-8"))
        if raw.get("version") != PROFILE_VERSION:
            continue
        calls.extend(CallProfile.from_dict(c) for c in raw.get("calls", []))
    return calls


def profiled_libraries() -> list[str]:
    """Namespaces of the loaded libraries whose calls can be profiled (built by this neuron_emu)."""
    with _LOCK:
        _HANDLES.all()
        return sorted(ns for ns, lib in loaded_libraries().items() if _HANDLES.profiled(lib.path))


@contextmanager
def recording() -> Iterator[list[CallProfile]]:
    """Log every custom-op call made in the block; the yielded list holds them (in call order) after it.

    Process-wide (calls from any thread are logged); blocks may nest, each sees the calls made inside it.
    Libraries loaded inside the block are logged from the next block on.
    """
    calls: list[CallProfile] = []
    with _LOCK:
        handles = _HANDLES.all()
        pending = _drain(handles)
        for log in _ACTIVE:
            log.extend(pending)
        _ACTIVE.append(calls)
        for handle in handles:
            handle.nemu_profile_record(1)
    try:
        yield calls
    finally:
        with _LOCK:
            handles = _HANDLES.all()
            made = _drain(handles)
            for log in _ACTIVE:
                log.extend(made)
            _ACTIVE.remove(calls)
            if not _ACTIVE:
                for handle in handles:
                    handle.nemu_profile_record(0)
