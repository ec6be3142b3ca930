"""moto's CloudWatch Logs: FilterLogEvents interleaves the streams' events, as AWS does (listed in infra/README.md).

AWS, FilterLogEvents API reference: the `interleaved` parameter is deprecated and ignored, "the value is assumed to
be true": the events of every stream come sorted by time together. moto 5.2 sorts them only when the request asks
(`interleaved=true`); otherwise it answers stream after stream, so `aws logs filter-log-events` on an endpoint's group
(whose instances write side by side) read out of order, and its pagination walked stream by stream.
"""

from __future__ import annotations

import threading
from typing import Any

from moto.logs.models import LogGroup

_lock = threading.Lock()
_applied = False


def apply() -> None:
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
    original = LogGroup.filter_log_events

    def filter_log_events(self: LogGroup, *args: Any, **kwargs: Any) -> Any:
        if "interleaved" in kwargs:
            kwargs["interleaved"] = True
        else:  # positional: (group name, stream names, start, end, limit, token, pattern, interleaved)
            args = (*args[:7], True, *args[8:])
        return original(self, *args, **kwargs)

    LogGroup.filter_log_events = filter_log_events  # type: ignore[method-assign]
