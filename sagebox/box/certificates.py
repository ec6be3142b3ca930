"""The box's TLS certificates (pure: keys and certificates in, PEM bytes out; the callers write the files).

- The local registry's: a self-signed certificate for its 127.0.0.1 address (docker and podman trust it per host).
- The AWS proxy's: a certificate authority of the box's own, name-constrained to AWS's domains, and one leaf per AWS
  hostname a client asks for, issued on the fly. The name constraints (RFC 5280 4.2.1.10, enforced by OpenSSL and so
  by Python, curl and Node) mean that even a stolen key of this CA cannot vouch for any host outside those domains.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509 import CertificateBuilder


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def self_signed_ip(host: str, common_name: str, days: int = 3650) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM): a self-signed certificate for the IP address `host`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    private, builder = _self_signed(common_name, days)
    certificate = (
        builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem(private)


def _self_signed(common_name: str, days: int) -> tuple[EllipticCurvePrivateKey, CertificateBuilder]:
    """(a new key, a certificate builder for it, self-issued to `common_name`, valid from a day ago for `days`)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    private = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=days))
    )
    return private, builder


@dataclass(frozen=True)
class Authority:
    """A certificate authority: its certificate and key, as PEM."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def create(cls, common_name: str, permitted_domains: Sequence[str], days: int = 3650) -> Authority:
        """A new CA that may only vouch for `permitted_domains` and their subdomains."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        private, builder = _self_signed(common_name, days)
        certificate = (
            builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.NameConstraints(
                    permitted_subtrees=[x509.DNSName(d) for d in permitted_domains], excluded_subtrees=None
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(private.public_key()), critical=False)
            .sign(private, hashes.SHA256())
        )
        return cls(certificate.public_bytes(serialization.Encoding.PEM), key_pem(private))

    def issue(self, hostname: str, leaf_key: EllipticCurvePrivateKey, days: int = 7) -> bytes:
        """A server certificate (PEM) for `hostname`, for `leaf_key`, signed by this CA."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        ca_cert = x509.load_pem_x509_certificate(self.cert_pem)
        ca_key = serialization.load_pem_private_key(self.key_pem, password=None)
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)]))
            .issuer_name(ca_cert.subject)
            .public_key(leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        )
        return certificate.public_bytes(serialization.Encoding.PEM)


def new_leaf_key() -> EllipticCurvePrivateKey:
    """One key for every leaf certificate a proxy issues (a leaf per hostname, one key pair)."""
    return _key()
