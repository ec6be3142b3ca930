"""Where InvokeEndpoint goes: the local box when one is running (and no real-account option says otherwise), else
the AWS account of the usual environment/profile. The one place `invoke`, `bench` and the invoke scripts decide it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagebox import aws

if TYPE_CHECKING:
    from sagebox.box.inventory import BoxEndpoint
    from sagebox.box.state import BoxState


@dataclass(frozen=True)
class Runtime:
    client: Any  # boto3 sagemaker-runtime client
    box: BoxState | None  # the local box it talks to, or None for a real account
    endpoints: dict[str, BoxEndpoint]  # the box's InService endpoints by target (empty for a real account)

    @property
    def local(self) -> bool:
        return self.box is not None

    def find(self, name: str) -> BoxEndpoint | None:
        """A box endpoint by target (c6i-int8) or endpoint name (sagebox-c6i-int8)."""
        return self.endpoints.get(name) or next((e for e in self.endpoints.values() if e.endpoint_name == name), None)

    def by_variant(self, variant: str, task: str | None = "question-answering") -> BoxEndpoint | None:
        """The first endpoint (by target) serving `variant` for `task` (None: any task)."""
        return next(
            (
                self.endpoints[t]
                for t in sorted(self.endpoints)
                if self.endpoints[t].variant == variant and (task is None or self.endpoints[t].task == task)
            ),
            None,
        )


def running_box() -> BoxState | None:
    from sagebox.box import processes
    from sagebox.box.state import load_state
    from sagebox.paths import state_dir

    box = load_state(state_dir())
    return box if box is not None and box.aws_pid and processes.alive(box.aws_pid) else None


def box_endpoints(box: BoxState) -> dict[str, BoxEndpoint]:
    """The box's InService endpoints by target."""
    from sagebox.box.inventory import list_endpoints
    from sagebox.box.up import box_clients
    from sagebox.paths import state_dir

    (sagemaker,) = box_clients(box, "sagemaker")
    return {t: e for t, e in list_endpoints(box, state_dir(), sagemaker).items() if e.status == "InService"}


def connect(
    region: str | None = None, profile: str | None = None, runtime_url: str | None = None, *, use_box: bool = True
) -> Runtime:
    """The local box unless a profile or a runtime URL other than the box's is given (or `use_box` is False); a
    real account otherwise."""
    box = running_box() if use_box and not profile else None
    if box is not None and runtime_url in (None, box.gateway_url):
        options = aws.AwsOptions.for_box(region or box.region, box.aws_url, box.gateway_url)
        return Runtime(aws.client(aws.session(options), "sagemaker-runtime", options), box, box_endpoints(box))
    options = aws.AwsOptions.from_env(region=region, profile=profile, runtime_endpoint_url=runtime_url)
    return Runtime(aws.client(aws.session(options), "sagemaker-runtime", options), None, {})
