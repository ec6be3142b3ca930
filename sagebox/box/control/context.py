"""What every controller of the control plane shares, and what one pass of the loop hands them.

`Context` is the shared fleet state and the files written from it, box time, the embedded SageMaker's endpoint
records, and the hooks to the rest of the box: `spawn` runs work in the background (a daemon thread; inline in tests),
`settle` tells CloudFormation an endpoint's status may have changed, `wake` starts the next pass at once, `note`
writes a failure's reason into the endpoint's logs. Each
controller gets it, plus the I/O of its own concern (launching instances, health checks, model data), from the loop
(sagebox.box.reconciler), never from a global.

`Observed` is one endpoint as a pass found it, before any controller acted on it.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagebox.box import specs
from sagebox.box.control.box_time import BoxTime
from sagebox.box.control.describe import utc_now
from sagebox.box.control.fleet_state import Deployment, FleetState
from sagebox.box.control.records import Records
from sagebox.box.specs import EndpointSpec, SpecError

Spawn = Callable[[Callable[[], None], str], None]
# note(endpoint, variant, instance id or None for an instance that never started, message): a line of the box's own
# in the instance's log stream (sagebox.box.endpoint_logs), as a failure's reason.
Note = Callable[[str, str, str | None, str], None]


def no_note(endpoint: str, variant: str, instance_id: str | None, message: str) -> None:
    """The `note` of a box without endpoint logs (tests)."""


def epoch_s() -> float:
    """The box's `wall`: epoch seconds (a module function, as the context's `time` field is box time)."""
    return time.time()


def thread(fn: Callable[[], None], name: str) -> None:
    """The box's `spawn`: a daemon thread, so a stuck start never keeps the embedded AWS from exiting."""
    threading.Thread(target=fn, name=name, daemon=True).start()


@dataclass
class Context:
    state: FleetState
    records: Records
    time: BoxTime
    backend: Callable[[], Any]  # the embedded SageMaker's backend (moto's); its `endpoints` are the records
    spawn: Spawn = thread
    settle: Callable[[], None] = lambda: None
    wake: Callable[[], None] = lambda: None
    wall: Callable[[], float] = epoch_s  # epoch seconds: the clock of the gateway's serverless activity file
    utc: Callable[[], datetime.datetime] = utc_now  # DescribeEndpoint's times
    note: Note = no_note  # a failure's reason in the instance's log stream

    def current(self, name: str) -> Any:
        """The endpoint's record in the embedded SageMaker (None once it is deleted)."""
        return self.backend().endpoints.get(name)


@dataclass(frozen=True)
class Observed:
    """One endpoint as a pass found it: what the embedded SageMaker asks for (or why it cannot be deployed), and the
    fleet that served it when the pass began."""

    name: str
    spec: EndpointSpec | SpecError
    live: Deployment | None

    @property
    def capacity_change(self) -> bool:
        """Updating, but on the config that serves: UpdateEndpointWeightsAndCapacities (autoscaling calls it), which
        changes the serving fleet, not UpdateEndpoint, which deploys a new one."""
        spec, live = self.spec, self.live
        return (
            isinstance(spec, EndpointSpec)
            and spec.status == specs.UPDATING
            and live is not None
            and not spec.update_pending
            and spec.config_name == live.config_name
        )
