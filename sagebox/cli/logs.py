"""`sagebox logs ENDPOINT [--follow]`: an endpoint's CloudWatch Logs (group `/aws/sagemaker/Endpoints/<endpoint>`),
read through the Logs API (FilterLogEvents) from the local box, or from a real account with --profile/--region.
The box writes them as SageMaker does (sagebox.box.endpoint_logs); this is only a reader."""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from sagebox.errors import SageboxError

GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
FOLLOW_EVERY_S = 1.0
SINCE = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="an endpoint's CloudWatch Logs (every instance's output), from the box or AWS")
    p.add_argument("endpoint", help="endpoint name (or a local target such as c6i-int8)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until Ctrl-C")
    p.add_argument("--since", help="only events this recent: 30s, 10m, 2h, 1d (default: all)")
    p.add_argument(
        "--filter", dest="pattern", help="a CloudWatch Logs filter pattern, e.g. ERROR or '\"model refused\"'"
    )
    p.add_argument("--region", help="AWS region (default: AWS_REGION, or the local box's)")
    p.add_argument("--profile", help="AWS profile for a real account")
    p.set_defaults(func=run)


def since_ms(text: str | None, now_s: float) -> int | None:
    if not text:
        return None
    match = SINCE.match(text.strip())
    if not match:
        raise SageboxError(f"--since {text!r}: give a number and a unit, s, m, h or d (e.g. 10m)")
    return int((now_s - int(match[1]) * UNITS[match[2]]) * 1000)


def logs_client(region: str | None, profile: str | None) -> tuple[Any, bool]:
    """(a CloudWatch Logs client, whether it is the local box's): the box's unless --profile names an account."""
    from sagebox import aws
    from sagebox.runtime import running_box

    box = None if profile else running_box()
    if box is not None:
        options = aws.AwsOptions.for_box(region or box.region, box.aws_url, box.gateway_url)
    else:
        options = aws.AwsOptions.from_env(region=region, profile=profile)
    return aws.client(aws.session(options), "logs", options), box is not None


def log_group(client: Any, endpoint: str, local: bool) -> str:
    """The endpoint's log group; in the box a target name (c6i-int8) finds its endpoint's (sagebox-c6i-int8)."""
    names = [endpoint, f"sagebox-{endpoint}"] if local and not endpoint.startswith("sagebox-") else [endpoint]
    for name in names:
        group = f"{GROUP_PREFIX}{name}"
        found = client.describe_log_groups(logGroupNamePrefix=group).get("logGroups", [])
        if any(g["logGroupName"] == group for g in found):
            return group
    raise SageboxError(
        f"no logs for endpoint {endpoint}: log group {GROUP_PREFIX}{endpoint} does not exist "
        "(an endpoint's group appears once its first instance starts)"
    )


def events(client: Any, group: str, start_ms: int | None, pattern: str | None) -> Iterator[dict[str, Any]]:
    """Every event of the group from `start_ms` on, oldest first, across FilterLogEvents' pages."""
    request: dict[str, Any] = {"logGroupName": group}
    if start_ms is not None:
        request["startTime"] = start_ms
    if pattern:
        request["filterPattern"] = pattern
    while True:
        page = client.filter_log_events(**request)
        yield from page.get("events", [])
        token = page.get("nextToken")
        if not token or token == request.get("nextToken"):
            return
        request["nextToken"] = token


def line(event: dict[str, Any]) -> str:
    stamp = datetime.datetime.fromtimestamp(event["timestamp"] / 1000, datetime.UTC)
    return f"{stamp.isoformat(timespec='milliseconds')} {event.get('logStreamName', '')} {event['message']}"


def follow(
    client: Any,
    group: str,
    start_ms: int | None,
    pattern: str | None,
    out: TextIO,
    sleep: Callable[[float], None] = time.sleep,
    polls: int | None = None,
) -> int:
    """Print the events, then every new one each FOLLOW_EVERY_S (forever, or `polls` times); the events printed."""
    printed = 0
    seen: dict[str, int] = {}  # events printed at or after `newest` (the next poll starts there again): id -> ms
    newest = start_ms
    round_ = 0
    while True:
        for event in events(client, group, newest, pattern):
            key = str(event.get("eventId"))
            if key in seen:
                continue
            print(line(event), file=out, flush=True)
            printed += 1
            seen[key] = event["timestamp"]
        round_ += 1
        if polls is not None and round_ >= polls:
            return printed
        if seen:
            newest = max(seen.values())
            seen = {k: ts for k, ts in seen.items() if ts >= newest}
        sleep(FOLLOW_EVERY_S)


def run(args: argparse.Namespace) -> int:
    client, local = logs_client(args.region, args.profile)
    group = log_group(client, args.endpoint, local)
    start = since_ms(args.since, time.time())
    try:
        follow(client, group, start, args.pattern, sys.stdout, polls=None if args.follow else 1)
    except KeyboardInterrupt:  # Ctrl-C ends --follow: not an error
        return 0
    return 0
