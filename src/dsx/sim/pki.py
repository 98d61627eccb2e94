"""Certificates for one simulated cluster: a CA, the serving certs, the admin identity, SA keys.

The apiserver serves real TLS and checks client certificates, as a production control plane
does; nothing here disables verification. ECDSA P-256 keeps generation in milliseconds.
Existing files are reused, so restarting a stopped cluster keeps its kubeconfig valid.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dsx import atomic, errors

VALIDITY = datetime.timedelta(days=3650)
APISERVER_SERVICE_IP = "10.96.0.1"
SERVICE_CIDR = "10.96.0.0/16"


@dataclass(frozen=True)
class Pki:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca_cert(self) -> Path:
        return self.path("ca.crt")

    @property
    def apiserver_cert(self) -> Path:
        return self.path("apiserver.crt")

    @property
    def apiserver_key(self) -> Path:
        return self.path("apiserver.key")

    @property
    def admin_cert(self) -> Path:
        return self.path("admin.crt")

    @property
    def admin_key(self) -> Path:
        return self.path("admin.key")

    @property
    def kwok_cert(self) -> Path:
        return self.path("kwok.crt")

    @property
    def kwok_key(self) -> Path:
        return self.path("kwok.key")

    @property
    def service_account_key(self) -> Path:
        return self.path("sa.key")

    @property
    def service_account_public_key(self) -> Path:
        return self.path("sa.pub")


def _write(path: Path, data: bytes, *, secret: bool) -> None:
    atomic.write_file(path, data, mode=0o600 if secret else 0o644)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server_names: tuple[str, ...] = (),
    server_ips: tuple[str, ...] = (),
    client: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        usages = []
        if server_names or server_ips:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            alt: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            alt += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def ensure(directory: Path) -> Pki:
    """Create the cluster's certificates unless they already exist."""
    pki = Pki(directory)
    if all(
        p.is_file()
        for p in (pki.ca_cert, pki.apiserver_cert, pki.admin_cert, pki.kwok_cert, pki.service_account_public_key)
    ):
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("dsx-sim-ca")
    ca = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)
    _write(pki.path("ca.key"), _key_pem(ca_key), secret=True)
    _write(pki.ca_cert, ca.public_bytes(serialization.Encoding.PEM), secret=False)

    def leaf(stem: str, subject: x509.Name, **kwargs: object) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(subject, key, ca_name, ca_key, **kwargs)  # type: ignore[arg-type]
        _write(pki.path(f"{stem}.key"), _key_pem(key), secret=True)
        _write(pki.path(f"{stem}.crt"), cert.public_bytes(serialization.Encoding.PEM), secret=False)

    leaf(
        "apiserver",
        _name("kube-apiserver"),
        server_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        server_ips=("127.0.0.1", APISERVER_SERVICE_IP),
    )
    # one admin identity for the user and for the components (as kwokctl does);
    # the apiserver also presents it to the kwok "kubelet" when fetching logs
    leaf("admin", _name("dsx-sim-admin", "system:masters"), client=True)
    leaf("kwok", _name("kwok-kubelet"), server_names=("localhost",), server_ips=("127.0.0.1",))

    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write(pki.service_account_key, _key_pem(sa_key), secret=True)
    public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(pki.service_account_public_key, public, secret=False)
    return pki


def serving_certificate(
    pki: Pki, directory: Path, *, ips: tuple[str, ...], names: tuple[str, ...] = ("localhost",)
) -> Path:
    """`tls.crt`/`tls.key` for a server on loopback (a controller's webhooks), signed by the cluster's CA."""
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    if cert_file.is_file() and key_file.is_file():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = serialization.load_pem_private_key(pki.path("ca.key").read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise errors.InternalError(f"{pki.path('ca.key')}: not the EC key dsx sim writes")
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(_name("dsx-sim-webhooks"), key, ca.subject, ca_key, server_names=names, server_ips=ips)
    _write(key_file, _key_pem(key), secret=True)
    _write(cert_file, cert.public_bytes(serialization.Encoding.PEM), secret=False)
    return directory
