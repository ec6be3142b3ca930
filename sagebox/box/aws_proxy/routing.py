"""Which box process answers a hostname, and which proxy the passed-through traffic takes (pure: no I/O).

AWS's service endpoints are hostnames under a handful of domains (AWS General Reference, "AWS service endpoints":
`<service>.<region>.amazonaws.com`, `.amazonaws.com.cn` in China, and the dual-stack `<service>.<region>.api.aws`).
The box answers every one of them: SageMaker's runtime (`runtime.sagemaker.<region>.amazonaws.com`) by the runtime
gateway, every other service by the embedded AWS, which tells the service from the Host header as moto does for real
AWS hostnames (virtual-hosted S3 buckets included). Every other hostname is none of the box's business.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

AWS_DOMAINS = ("amazonaws.com", "amazonaws.com.cn", "api.aws")
# SageMaker's runtime API hosts: runtime.sagemaker.<region>.amazonaws.com (and its FIPS form).
RUNTIME_PREFIXES = ("runtime.sagemaker.", "runtime-fips.sagemaker.")
# What `sagebox env` exports: the box proxy's URL, and the proxy the shell used before, if any.
PROXY_MARKER = "SAGEBOX_AWS_PROXY"
UPSTREAM = "SAGEBOX_UPSTREAM_PROXY"


class Route(enum.Enum):
    EMBEDDED_AWS = "embedded AWS"
    RUNTIME_GATEWAY = "runtime gateway"
    PASS_THROUGH = "passed through (not an AWS hostname)"


LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DNS_NAME = re.compile(rf"^{LABEL}(?:\.{LABEL})*$")


def is_aws_hostname(host: str) -> bool:
    """A DNS name under one of AWS's domains (nothing else gets a certificate of the box's CA)."""
    host = host.lower().rstrip(".")
    if len(host) > 253 or not DNS_NAME.match(host):
        return False
    return any(host == domain or host.endswith(f".{domain}") for domain in AWS_DOMAINS)


def route(host: str) -> Route:
    """Who answers `host`: the runtime gateway, the embedded AWS, or nobody of the box's (passed through)."""
    host = host.lower().rstrip(".")
    if not is_aws_hostname(host):
        return Route.PASS_THROUGH
    if host.startswith(RUNTIME_PREFIXES):
        return Route.RUNTIME_GATEWAY
    return Route.EMBEDDED_AWS


def split_authority(authority: str, default_port: int) -> tuple[str, int]:
    """`host[:port]` or `[v6]:port` -> (host, port); ValueError when it is neither."""
    authority = authority.strip()
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif authority.count(":") == 1:
        host, _, port = authority.partition(":")
    else:
        host, port = authority, ""
    if not host or any(c in host for c in "/@ ") or (port and not port.isdigit()):
        raise ValueError(f"not a host[:port]: {authority!r}")
    number = int(port) if port else default_port
    if not 0 < number < 65536:
        raise ValueError(f"port out of range: {authority!r}")
    return host, number


def shell_proxy(env: Mapping[str, str]) -> str:
    """The HTTPS proxy the shell names (HTTPS_PROXY, https_proxy), '' when none."""
    return (env.get("HTTPS_PROXY") or env.get("https_proxy") or "").strip()


def upstream_proxy(env: Mapping[str, str]) -> str:
    """The proxy that passed-through traffic takes: the shell's own HTTPS proxy, unless that is a box's (after `eval
    "$(sagebox env)"`), whose upstream `sagebox env` kept in SAGEBOX_UPSTREAM_PROXY. '' means direct."""
    named = shell_proxy(env)
    if named and named == env.get(PROXY_MARKER, "").strip():
        return env.get(UPSTREAM, "").strip()
    return named


def no_proxy(env: Mapping[str, str]) -> str:
    """NO_PROXY for the box's shell: loopback (the box's own endpoints are reached directly), then what the shell
    already bypassed, each once."""
    named = (env.get("NO_PROXY") or env.get("no_proxy") or "").split(",")
    seen: list[str] = []
    for item in ["localhost", "127.0.0.1", "::1", *named]:
        item = item.strip()
        if item and item not in seen:
            seen.append(item)
    return ",".join(seen)
