"""The AWS proxy's files: the box's CA (name-constrained to AWS's domains), the leaf certificates it issues, and the
CA bundle `sagebox env` exports (this machine's trusted CAs plus the box's), so that clients that verify TLS trust
the box for AWS hostnames and everything else exactly as before."""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box.aws_proxy.routing import AWS_DOMAINS
from sagebox.box.certificates import Authority, key_pem, new_leaf_key
from sagebox.errors import SageboxError

# Where this machine keeps its trusted CAs when OpenSSL's compiled-in default names nothing readable (Debian's).
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


def system_bundle() -> Path:
    """This machine's trusted CAs: OpenSSL's default file, else a distribution's, else certifi's. The environment's
    SSL_CERT_FILE is not read: in a shell that ran `sagebox env` it is the box's own bundle."""
    paths = ssl.get_default_verify_paths()
    candidates = [paths.openssl_cafile, *SYSTEM_BUNDLES]
    try:
        import certifi

        candidates.append(certifi.where())
    except ImportError:  # pragma: no cover - certifi comes with botocore's and requests' installs
        pass
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise SageboxError("no CA bundle found on this machine (install ca-certificates)")


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


@dataclass
class ProxyTrust:
    """The box CA under `root` (made once per state directory) and the TLS contexts of its leaves, one per host."""

    root: Path
    _authority: Authority | None = None
    _leaf_key: Any = None
    _contexts: dict[str, ssl.SSLContext] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca-key.pem"

    @property
    def bundle(self) -> Path:
        """This machine's CAs and the box's: what AWS_CA_BUNDLE, SSL_CERT_FILE and the like name."""
        return self.root / "ca-bundle.pem"

    def prepare(self) -> Path:
        """The CA (kept if there is one) and the bundle written anew; returns the bundle."""
        if self.ca_cert.is_file() and self.ca_key.is_file():
            authority = Authority(self.ca_cert.read_bytes(), self.ca_key.read_bytes())
        else:
            authority = Authority.create("Sagebox local box CA (AWS hostnames only)", AWS_DOMAINS)
            _write(self.ca_key, authority.key_pem, 0o600)
            _write(self.ca_cert, authority.cert_pem)
        self._authority = authority
        system = system_bundle().read_bytes()
        _write(self.bundle, system.rstrip(b"\n") + b"\n" + authority.cert_pem)
        return self.bundle

    def context_for(self, hostname: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for `hostname`, issued once and kept."""
        with self._lock:
            found = self._contexts.get(hostname)
            if found is not None:
                return found
            if self._authority is None:
                self.prepare()
            assert self._authority is not None
            if self._leaf_key is None:
                self._leaf_key = new_leaf_key()
                _write(self.root / "leaf-key.pem", key_pem(self._leaf_key), 0o600)
            cert = self.root / "leaves" / f"{hostname}.pem"
            _write(cert, self._authority.issue(hostname, self._leaf_key) + self._authority.cert_pem)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.set_alpn_protocols(["http/1.1"])  # the box's services speak HTTP/1.1
            context.load_cert_chain(cert, self.root / "leaf-key.pem")
            self._contexts[hostname] = context
            return context
