"""A load generator over any `send()` callable: closed loop at a concurrency, or a fixed arrival rate.

Time comes from an injected clock, so tests can drive it; runs are bounded by count and by duration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

Send = Callable[[int], None]  # called with the query index; raises on failure


@dataclass
class LoadResult:
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    issued: int = 0

    @property
    def qps(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class LoadPlan:
    queries: int
    concurrency: int = 1
    rate_qps: float | None = None  # None: closed loop; else fixed arrival rate (open loop)
    max_seconds: float = 600.0
    warmup: int = 0


def run_load(
    send: Send,
    plan: LoadPlan,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> LoadResult:
    for i in range(plan.warmup):
        send(-1 - i)
    result = LoadResult()
    lock = threading.Lock()
    started = clock()
    deadline = started + plan.max_seconds

    def one(index: int, scheduled: float | None = None) -> None:
        # Open loop: latency counts from the scheduled arrival, so queueing is not hidden (coordinated omission).
        t0 = clock() if scheduled is None else scheduled
        try:
            send(index)
        except Exception as exc:
            with lock:
                result.errors.append(f"{type(exc).__name__}: {exc}")
            return
        elapsed = clock() - t0
        with lock:
            result.latencies_s.append(elapsed)

    if plan.rate_qps is None:
        counter = iter(range(plan.queries))

        def worker() -> None:
            while clock() < deadline:
                with lock:
                    index = next(counter, None)
                    if index is not None:
                        result.issued += 1
                if index is None:
                    return
                one(index)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(plan.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        interval = 1.0 / plan.rate_qps
        with ThreadPoolExecutor(max_workers=max(plan.concurrency, 1)) as pool:
            for index in range(plan.queries):
                due = started + index * interval
                if due >= deadline:
                    break
                delay = due - clock()
                if delay > 0:
                    sleep(delay)
                result.issued += 1
                pool.submit(one, index, due)
    result.wall_s = clock() - started
    return result
