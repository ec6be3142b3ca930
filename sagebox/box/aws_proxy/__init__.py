"""Hard-coded AWS hostnames reach the box: a loopback HTTPS proxy with a CA of the box's own.

Most clients honour `AWS_ENDPOINT_URL`; some build `https://<service>.<region>.amazonaws.com` themselves (the
SageMaker Python SDK v2 asks STS for the account through `sts_regional_endpoint(region)`), and presigned URLs name AWS
hosts too. `sagebox env` names this proxy in the standard proxy variables and a CA bundle (this machine's CAs plus the
box's) in the standard CA variables, so such a client's request for an AWS hostname is answered by the box, over TLS it
trusts, on loopback; every other host is passed through untouched (sagebox.box.aws_proxy.server).

- `routing`: which box process answers a hostname (pure);
- `trust`: the CA (name-constrained to AWS's domains), its leaf certificates, the exported bundle;
- `server`: the proxy process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagebox.box.aws_proxy.routing import upstream_proxy

LOG_NAME = "aws-proxy.log"


@dataclass(frozen=True)
class RunningProxy:
    url: str  # http://127.0.0.1:PORT, what HTTPS_PROXY names
    pid: int
    bundle: Path  # the CA bundle clients verify with
    log: Path


def start(state_dir: Path, aws_url: str, gateway_url: str, env: dict[str, str] | None = None) -> RunningProxy:
    """The CA and bundle made here (so they exist when this returns), then the proxy process on a port bound here and
    inherited by it; returns once it answers."""
    import os

    from sagebox.box import processes
    from sagebox.box.aws_proxy.trust import ProxyTrust
    from sagebox.local_server import inherited_listener

    bundle = ProxyTrust(state_dir / "aws-proxy").prepare()
    log = state_dir / "logs" / LOG_NAME
    upstream = upstream_proxy(os.environ if env is None else env)
    with inherited_listener() as (fd, listen):
        port = int(listen["SAGEMAKER_BIND_TO_PORT"])
        args = ["-m", "sagebox.box.aws_proxy.server", "--fd", str(fd), "--state-dir", str(state_dir)]
        args += ["--aws", aws_url, "--gateway", gateway_url, *(["--upstream", upstream] if upstream else [])]
        pid = processes.spawn(args, log, pass_fds=(fd,))
    url = f"http://127.0.0.1:{port}"
    # A request that is not a proxy's gets the proxy's own 400: it is up and answering.
    processes.wait_http(f"{url}/", pid, log, timeout=60, ok=(400,))
    return RunningProxy(url, pid, bundle, log)
