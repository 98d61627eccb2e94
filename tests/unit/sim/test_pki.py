"""Area of concern: the simulated cluster's certificates chain to its CA with the names and
identities the components and clients check."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dsx.sim import pki


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_leaf_certificates_are_signed_by_the_ca(tmp_path: Path) -> None:
    certs = pki.ensure(tmp_path / "pki")
    ca = _cert(certs.ca_cert)
    for leaf in (certs.apiserver_cert, certs.admin_cert, certs.kwok_cert):
        cert = _cert(leaf)
        cert.verify_directly_issued_by(ca)
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)


def test_serving_names_and_client_identity(tmp_path: Path) -> None:
    certs = pki.ensure(tmp_path / "pki")
    serving = _cert(certs.apiserver_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in serving.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in serving.get_values_for_type(x509.DNSName)
    admin = _cert(certs.admin_cert)
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage


def test_keys_are_private_and_existing_pki_is_reused(tmp_path: Path) -> None:
    certs = pki.ensure(tmp_path / "pki")
    assert stat.S_IMODE(certs.admin_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(certs.service_account_key.stat().st_mode) == 0o600
    before = certs.ca_cert.read_bytes()
    assert pki.ensure(tmp_path / "pki").ca_cert.read_bytes() == before
