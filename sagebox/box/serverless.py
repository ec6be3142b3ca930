"""Serverless variants in the box: scale to zero after an idle period, a cold start on the next request.

After AWS's "Serverless Inference" (https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html): a
serverless endpoint has no instances to choose; SageMaker starts compute when requests come, stops it when none
come for a while ("During times when there are no requests, Serverless Inference scales your endpoint down to 0"),
so the next request waits for a cold start; invocations past the variant's MaxConcurrency are throttled (the
runtime answers 429 ThrottlingException). In the box one instance (a process or a container with the variant's
MemorySizeInMB as its memory limit) serves a serverless variant; the runtime gateway counts its invocations and
throttles past MaxConcurrency, and tells the control plane what it sees through a small file in the box's state
directory (`serverless.json`): per variant, when the last request came, how many are in flight and how many wait
for a cold start. The control plane stops the instance after `idle_s` box seconds without a request (AWS does not
document its idle period; the box's default is DEFAULT_IDLE_S) and starts one when a request waits.

Pure logic and the file's I/O; the control plane (sagebox.box.reconciler) and the gateway do the rest.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ACTIVITY_FILE = "serverless.json"
# Box seconds without a request before a serverless variant scales to zero (AWS documents none; ten minutes is
# the box's choice, shortened by the box time scale like every other wait: 6 s at SAGEBOX_BOX_TIME_SCALE=0.01).
DEFAULT_IDLE_S = 600.0

Action = Literal["stop", "start"]


@dataclass(frozen=True)
class Activity:
    """What the gateway saw of one serverless variant."""

    last_request_at: float = 0.0  # epoch seconds the last request arrived (0: none since the gateway started)
    in_flight: int = 0  # invocations being served (or waiting for a cold start)
    waiting: int = 0  # requests waiting for a cold start


Key = tuple[str, str]  # (endpoint, variant)


class ActivityTracker:
    """The gateway's side: each serverless variant's invocations in flight (at most its MaxConcurrency; `admit`
    refuses the next one), requests waiting for a cold start, and the last request's arrival. `changed` says the
    file should be written again."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._entries: dict[Key, Activity] = {}
        self.changed = False

    def _set(self, key: Key, **fields: float | int) -> None:
        current = self._entries.get(key, Activity())
        self._entries[key] = Activity(
            float(fields.get("last_request_at", current.last_request_at)),
            int(fields.get("in_flight", current.in_flight)),
            int(fields.get("waiting", current.waiting)),
        )
        self.changed = True

    def admit(self, key: Key, limit: int) -> bool:
        """One more invocation, unless `limit` are in flight already (then it is throttled)."""
        current = self._entries.get(key, Activity())
        if current.in_flight >= limit:
            return False
        self._set(key, in_flight=current.in_flight + 1, last_request_at=self._now())
        return True

    def release(self, key: Key) -> None:
        current = self._entries.get(key, Activity())
        self._set(key, in_flight=max(0, current.in_flight - 1), last_request_at=self._now())

    def wait_begin(self, key: Key) -> None:
        self._set(key, waiting=self._entries.get(key, Activity()).waiting + 1)

    def wait_end(self, key: Key) -> None:
        self._set(key, waiting=max(0, self._entries.get(key, Activity()).waiting - 1))

    def get(self, key: Key) -> Activity:
        return self._entries.get(key, Activity())

    def snapshot(self) -> dict[Key, Activity]:
        self.changed = False
        return dict(self._entries)


def read_activity(state_dir: Path) -> dict[tuple[str, str], Activity]:
    """(endpoint, variant) -> Activity; {} when the gateway wrote nothing yet (or wrote something unreadable)."""
    try:
        raw = json.loads((state_dir / ACTIVITY_FILE).read_text())
    except (OSError, ValueError):
        return {}
    found: dict[tuple[str, str], Activity] = {}
    if not isinstance(raw, dict):
        return found
    for endpoint, variants in raw.items():
        if not isinstance(variants, dict):
            continue
        for variant, entry in variants.items():
            try:
                found[(str(endpoint), str(variant))] = Activity(
                    float(entry.get("last_request_at", 0.0)),
                    int(entry.get("in_flight", 0)),
                    int(entry.get("waiting", 0)),
                )
            except (AttributeError, TypeError, ValueError):
                continue
    return found


def write_activity(state_dir: Path, activity: Mapping[tuple[str, str], Activity]) -> None:
    """Atomically, so the control plane never reads half of it."""
    nested: dict[str, dict[str, dict[str, float | int]]] = {}
    for (endpoint, variant), entry in sorted(activity.items()):
        nested.setdefault(endpoint, {})[variant] = {
            "last_request_at": entry.last_request_at,
            "in_flight": entry.in_flight,
            "waiting": entry.waiting,
        }
    state_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=f".{ACTIVITY_FILE}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(nested, fh)
    os.replace(tmp, state_dir / ACTIVITY_FILE)


def decide(
    activity: Activity | None,
    *,
    warm: bool,
    starting: bool,
    warm_since: float,
    now: float,
    idle_real_s: float,
) -> Action | None:
    """What the control plane does with one serverless variant now (times in epoch seconds, real time).

    A warm variant stops once nothing is in flight or waiting and neither its last request nor its last start is
    more recent than `idle_real_s`; a cold one starts when a request waits (unless a start is under way)."""
    if warm:
        if activity is not None and (activity.in_flight > 0 or activity.waiting > 0):
            return None
        last = max(warm_since, activity.last_request_at if activity is not None else 0.0)
        return "stop" if now - last >= idle_real_s else None
    if not starting and activity is not None and activity.waiting > 0:
        return "start"
    return None
