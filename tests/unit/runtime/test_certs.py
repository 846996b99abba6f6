"""The webhook's self-made certificate: signed by its CA, for exactly the names asked, whatever
their length, and loadable as a server context."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime

from cryptography import x509

from karpy.runtime.certs import self_signed

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_certificate_names_every_host_and_is_signed_by_the_ca() -> None:
    long_service = "karpy-" + "x" * 60 + ".karpy.svc"  # over a CN's 64 characters
    made = self_signed([long_service, "127.0.0.1"], now=NOW)
    cert = x509.load_pem_x509_certificate(made.cert)
    ca = x509.load_pem_x509_certificate(made.ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [long_service]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    context = made.server_context()
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert context.verify_mode is ssl.CERT_NONE  # serves; asks no client certificate
