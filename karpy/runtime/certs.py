"""A serving certificate for karpy's conversion webhook, made by karpy itself.

The apiserver calls a conversion webhook over TLS only, and trusts it through the CA bundle in
the CRD. Karpenter made its own CA and wrote the bundle into its CRDs; karpy does the same, so
installing it needs no cert-manager. The CA signs one serving certificate for the names the
apiserver dials (the Service's DNS names, or the host of a URL).
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALIDITY = timedelta(days=3650)
"""How long the certificates live; karpy makes new ones on every start, so this is no rotation
schedule, only a bound that outlasts any process."""


@attrs.frozen
class ServingCertificate:
    """PEM-encoded CA (for the CRDs' caBundle) and the certificate and key karpy serves."""

    ca: bytes
    cert: bytes
    key: bytes

    def server_context(self) -> ssl.SSLContext:
        """An SSLContext serving this certificate (TLS 1.2 or later)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # load_cert_chain reads files only; the key lives there for the call and no longer.
        with tempfile.TemporaryDirectory() as directory:
            cert, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
            cert.write_bytes(self.cert + self.ca)
            key.write_bytes(self.key)
            key.chmod(0o600)
            context.load_cert_chain(cert, key)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def self_signed(hosts: Sequence[str], *, now: datetime) -> ServingCertificate:
    """A fresh CA and a certificate it signs for `hosts` (DNS names or IP addresses)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("karpy-webhook-ca"))
        .issuer_name(_name("karpy-webhook-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        # The names live in the SAN; a CN is at most 64 characters, a Service's name may not be.
        .subject_name(_name("karpy-webhook"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificate(
        ca=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=_pem_key(key),
    )
