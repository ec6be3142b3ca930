"""The CPU goes to the model first: once the inference thread runs, the HTTP thread (the event loop that reads,
refuses, tokenizes and answers requests) lowers its own scheduling priority, so that a storm of requests the server
must refuse cannot take the CPU the model needs to answer the ones it admitted (measured: docs/serving.md).

On Linux a thread's nice value is its own (setpriority(2), "a thread's nice value is per-thread" under NPTL):
`os.setpriority(PRIO_PROCESS, <native thread id>, ...)` changes only that thread, and threads inherit the value of
the thread that creates them. So the inference thread (and the runtime's intra-op threads, created on it when the
model loads) keep the server's priority, while the HTTP thread and whatever it starts later (tokenizing threads) run
niced. Raising one's own nice needs no privilege, so this works as root (SageMaker) and as the service user.
A shorter GIL switch interval (1 ms instead of 5) was tried beside it and changed nothing measurable.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("sagebox.server")


def yield_to_model(http_nice: int) -> None:
    """Called on the HTTP thread after the inference thread has started: add `http_nice` to this thread's nice value
    (at most 19)."""
    if http_nice <= 0:
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + http_nice))
    except OSError as exc:  # not Linux semantics, or a sandbox that forbids it: serve anyway, and say so
        log.warning("could not lower the HTTP thread's priority (%s); the model shares the CPU evenly", exc)
