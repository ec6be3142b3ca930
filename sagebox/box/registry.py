"""The local OCI registry behind the embedded ECR: Debian's `docker-registry` (the CNCF Distribution registry).

cdk-assets logs in before it pushes, and `docker login` insists on HTTPS, so the registry serves TLS with a
certificate made here for 127.0.0.1 (FACTS.md, "A local registry that cdk-assets can use"). The engine must trust
that certificate: podman reads `/etc/containers/certs.d/<host:port>/ca.crt`; a Docker Engine treats 127.0.0.0/8
registries as insecure and needs nothing. Its storage lives in the state directory and outlives `sagebox down`,
like an engine's images, so a second `cdk deploy` of the same image pushes no layer again.
"""

from __future__ import annotations

import json
import shutil
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sagebox.errors import SageboxError

EXECUTABLE = "docker-registry"
DEBIAN_PACKAGE = "docker-registry"
CERTS_D = Path("/etc/containers/certs.d")
MANIFEST_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
)


@dataclass(frozen=True)
class RegistryFiles:
    root: Path

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    @property
    def config(self) -> Path:
        return self.root / "config.yml"

    @property
    def cert(self) -> Path:
        return self.root / "tls" / "cert.pem"

    @property
    def key(self) -> Path:
        return self.root / "tls" / "key.pem"

    @property
    def log(self) -> Path:
        return self.root / "registry.log"


def executable() -> str | None:
    return shutil.which(EXECUTABLE) or next(
        (str(p) for p in (Path("/usr/bin") / EXECUTABLE, Path("/usr/sbin") / EXECUTABLE) if p.is_file()), None
    )


def make_certificate(cert: Path, key: Path, host: str = "127.0.0.1", days: int = 3650) -> None:
    """A self-signed certificate for `host` (its own CA), unless one is already there."""
    if cert.is_file() and key.is_file():
        return
    from sagebox.box.certificates import self_signed_ip

    cert_pem, key_pem = self_signed_ip(host, f"sagebox local registry {host}", days)
    cert.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(key_pem)
    key.chmod(0o600)
    cert.write_bytes(cert_pem)


def config_text(files: RegistryFiles, host_port: str) -> str:
    return (
        "# Written by `sagebox up`: the embedded ECR's registry.\n"
        "version: 0.1\n"
        "log:\n  level: warn\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {files.storage}\n"
        "  delete:\n    enabled: true\n"
        "http:\n"
        f"  addr: {host_port}\n"
        f"  tls:\n    certificate: {files.cert}\n    key: {files.key}\n"
    )


def trust(host_port: str, cert: Path, certs_d: Path = CERTS_D) -> Path:
    """Make podman (containers/image) trust the registry's certificate; the file written."""
    target = certs_d / host_port / "ca.crt"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cert, target)
    except PermissionError:
        raise SageboxError(
            f"cannot write {target}: podman trusts a registry's certificate only there (run as root)"
        ) from None
    return target


def untrust(host_port: str, certs_d: Path = CERTS_D) -> None:
    shutil.rmtree(certs_d / host_port, ignore_errors=True)


class RegistryClient:
    """The registry's HTTP API (v2): what the embedded ECR reads to list images, what the control plane resolves."""

    def __init__(self, host_port: str, ca: Path, timeout_s: float = 10.0) -> None:
        self.host_port = host_port
        self._context = ssl.create_default_context(cafile=str(ca))
        self._timeout = timeout_s

    def _get(self, path: str, accept: str | None = None, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(f"https://{self.host_port}{path}", method=method)
        if accept:
            request.add_header("Accept", accept)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as response:
                return int(response.status), {k.lower(): v for k, v in response.headers.items()}, response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), {k.lower(): v for k, v in exc.headers.items()}, exc.read()

    def healthy(self) -> bool:
        try:
            return self._get("/v2/")[0] == 200
        except (OSError, urllib.error.URLError):
            return False

    def tags(self, repository: str) -> list[str]:
        status, _, body = self._get(f"/v2/{repository}/tags/list")
        if status == 404:
            return []
        if status != 200:
            raise SageboxError(f"registry {self.host_port}: tags of {repository} answered {status}")
        return sorted(json.loads(body).get("tags") or [])

    def manifest(self, repository: str, reference: str) -> tuple[str, str, bytes] | None:
        """(digest, media type, manifest bytes) of `repository:reference` (a tag or a digest), or None."""
        status, headers, body = self._get(f"/v2/{repository}/manifests/{reference}", accept=", ".join(MANIFEST_TYPES))
        if status == 404:
            return None
        if status != 200:
            raise SageboxError(f"registry {self.host_port}: manifest {repository}:{reference} answered {status}")
        digest = headers.get("docker-content-digest", "")
        media_type = headers.get("content-type", "").split(";")[0] or json.loads(body).get("mediaType", "")
        return digest, media_type, body


def start(files: RegistryFiles, host_port: str, timeout_s: float = 30.0) -> int:
    """Start the registry (TLS on `host_port`, storage under `files.root`); its pid once `/v2/` answers."""
    import time

    from sagebox.box import processes

    program = executable()
    if program is None:
        raise SageboxError(
            f"the local registry needs Debian's {DEBIAN_PACKAGE} package: run `sagebox containers setup` "
            f"(or apt-get install {DEBIAN_PACKAGE})"
        )
    make_certificate(files.cert, files.key, host_port.rsplit(":", 1)[0])
    files.storage.mkdir(parents=True, exist_ok=True)
    files.config.write_text(config_text(files, host_port))
    trust(host_port, files.cert)
    process = processes.popen_program([program, "serve", str(files.config)], files.log)
    client = RegistryClient(host_port, files.cert, timeout_s=2.0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SageboxError(f"the local registry exited with {process.returncode}; see {files.log}")
        if client.healthy():
            return process.pid
        time.sleep(0.1)
    raise SageboxError(f"the local registry did not answer on {host_port} within {timeout_s:.0f}s; see {files.log}")
