"""One invocation's call to an instance, timed: the container's answer, or why there was none.

Kept apart from what the gateway answers its caller, because every kind of call (a production invocation, a
shadow's copy, an asynchronous request) makes it the same way and reads the same three failures: no instance to
call, one that cannot be reached, one that does not answer in time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sagebox.box.upstream import Upstream, UpstreamResponse, UpstreamTimeout, UpstreamUnavailable

log = logging.getLogger("sagebox.runtime")


@dataclass
class Forwarded:
    """One call to an instance: the container's answer, or why there was none."""

    url: str | None
    response: UpstreamResponse | None = None
    error: str = ""  # "timeout" | "unavailable" | "no-instance"
    model_s: float | None = None

    @property
    def status(self) -> int:
        if self.response is not None:
            return int(self.response.status_code)
        return 504 if self.error == "timeout" else 503


class Forwarder:
    def __init__(self, client: Upstream, timer: Callable[[], float]) -> None:
        self.client = client
        self._timer = timer

    async def forward(self, url: str | None, body: bytes, headers: dict[str, str], stream: bool = False) -> Forwarded:
        """POST /invocations to the instance at `url` (None: there is none); `model_s` is the container's time
        (with `stream`, to its first byte: the answer's body then arrives through `response.stream`, except for an
        error status, whose body is read whole)."""
        if url is None:
            return Forwarded(None, error="no-instance")
        sent = self._timer()
        try:
            if stream:
                response = await self.client.post_stream(url, "/invocations", body, headers)
                if response.status_code >= 400 and response.stream is not None:
                    response.body = b"".join([chunk async for chunk in response.stream])
                    response.stream = None
            else:
                response = await self.client.post(url, "/invocations", body, headers)
        except UpstreamTimeout:
            return Forwarded(url, error="timeout")
        except UpstreamUnavailable as exc:
            log.warning("instance %s unreachable: %s", url, exc)
            return Forwarded(url, error="unavailable")
        return Forwarded(url, response, model_s=self._timer() - sent)
