"""What /proc says about the processes under test: memory, sessions, listening sockets (pure parsers of its texts,
and readers that take the /proc root, so tests hand them a fake one).

The overload scenario reads a server's RSS to see whether it queued the excess; the restart scenario lists the box's
listening sockets (what `ss -ltnp` shows) to check that every one is on loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


def parse_vm_rss_kib(status_text: str) -> int:
    """VmRSS of a /proc/<pid>/status text, in KiB."""
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            return int(value.split()[0])
    raise ValueError("no VmRSS line (a kernel thread, or a process that has exited)")


def rss_kib(pid: int, proc: Path = Path("/proc")) -> int:
    """The resident memory of `pid` now, in KiB."""
    return parse_vm_rss_kib((proc / str(pid) / "status").read_text())


class RssSampler:
    """The peak VmRSS of a process (or what `measure` reads of it, in KiB), sampled every `every_s` on a thread until
    stopped (a burst's peak falls between the readings before and after it)."""

    def __init__(self, pid: int, every_s: float = 0.25, measure: Callable[[int], int] = rss_kib) -> None:
        self.pid = pid
        self.every_s = every_s
        self.measure = measure
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                self.peak_kib = max(self.peak_kib, self.measure(self.pid))
                self.samples += 1
            self._stop.wait(self.every_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def parse_session_id(stat_text: str) -> int:
    """The session id of a /proc/<pid>/stat line (the command name in parentheses may hold spaces)."""
    fields = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(fields[3])  # after the name: state, ppid, pgrp, session


@dataclass(frozen=True)
class Listener:
    """A TCP listening socket: its address, port and inode, and the pid holding it (0: not looked up yet)."""

    host: str
    port: int
    inode: int
    pid: int = 0

    @property
    def loopback(self) -> bool:
        """On 127.0.0.0/8 or ::1 (an IPv4-mapped IPv6 address counts as its IPv4 one): reachable from this host
        only. 0.0.0.0 and :: are not."""
        address = ipaddress.ip_address(self.host)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address.is_loopback


def _decode_address(hex_address: str) -> str:
    """/proc/net/tcp{,6} prints addresses as 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_listeners(proc_net_tcp: str) -> list[Listener]:
    """The listening sockets (state 0A) of a /proc/net/tcp or /proc/net/tcp6 text."""
    listeners = []
    for line in proc_net_tcp.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != "0A":
            continue
        address, port = parts[1].rsplit(":", 1)
        listeners.append(Listener(_decode_address(address), int(port, 16), int(parts[9])))
    return listeners


def socket_inode(link: str) -> int | None:
    """The inode of a `socket:[12345]` fd link; None for anything else."""
    if link.startswith("socket:[") and link.endswith("]"):
        return int(link[len("socket:[") : -1])
    return None


def session_members(leaders: Iterable[int], proc: Path = Path("/proc")) -> set[int]:
    """`leaders` and every process in their sessions (the box starts each process in a session of its own)."""
    wanted = {pid for pid in leaders if pid}
    members = set(wanted)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError):
            if parse_session_id((entry / "stat").read_text()) in wanted:
                members.add(int(entry.name))
    return members


def listening_sockets(pids: Iterable[int], proc: Path = Path("/proc")) -> list[Listener]:
    """TCP listening sockets held by `pids` (what `ss -ltnp` shows for them), each with its pid."""
    owner: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in (proc / str(pid) / "fd").iterdir():
                with contextlib.suppress(OSError):
                    inode = socket_inode(os.readlink(fd))
                    if inode is not None:
                        owner[inode] = pid
    found = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for listener in parse_listeners((proc / "net" / table).read_text()):
                if listener.inode in owner:
                    found.append(Listener(listener.host, listener.port, listener.inode, owner[listener.inode]))
    return sorted(found, key=lambda item: (item.pid, item.port))
