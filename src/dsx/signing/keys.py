"""Key files: create, load and identify Ed25519 and ECDSA P-256 keys.

Private keys are PKCS#8 PEM, encrypted when a passphrase is given, and created with mode
0600 before a byte is written. Public keys are PEM SubjectPublicKeyInfo, the form cosign and
openssl read. A key's id is the sha256 hex of its re-serialised public PEM, the same value a
Sigstore bundle carries as its public-key hint, so the id does not depend on how a file was
line-wrapped.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from dsx import atomic
from dsx.errors import BadInputError, NotFoundError, allowed_values_message
from dsx.signing.signer import Algorithm

PASSPHRASE_ENV = "DSX_SIGNING_PASSPHRASE"  # noqa: S105 (the name of a variable, not a secret)
"""Environment variable holding the private-key passphrase (read by the CLI only)."""

PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIXES = (".pub", ".pem")

PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey


def generate(algorithm: Algorithm) -> PrivateKey:
    if algorithm is Algorithm.ED25519:
        return ed25519.Ed25519PrivateKey.generate()
    return ec.generate_private_key(ec.SECP256R1())


def public_pem(public_key: PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(public_key: PublicKey) -> str:
    """sha256 hex of the canonical public PEM (equals the Sigstore `publicKey.hint`)."""
    return hashlib.sha256(public_pem(public_key)).hexdigest()


def algorithm_of(key: PrivateKey | PublicKey) -> Algorithm:
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return Algorithm.ED25519
    return Algorithm.ECDSA_P256


class KeySigner:
    """A `Signer` backed by a private key held in memory."""

    def __init__(self, private_key: PrivateKey) -> None:
        self._private_key = private_key
        self._public = private_key.public_key()
        self.algorithm = algorithm_of(private_key)

    @property
    def key_id(self) -> str:
        return key_id(self._public)

    @property
    def public_key_pem(self) -> bytes:
        return public_pem(self._public)

    def sign(self, message: bytes) -> bytes:
        if isinstance(self._private_key, ed25519.Ed25519PrivateKey):
            return self._private_key.sign(message)
        return self._private_key.sign(message, ec.ECDSA(hashes.SHA256()))


@dataclass(frozen=True)
class TrustedKey:
    """A public key the verifier trusts, with the file it came from."""

    public_key: PublicKey
    source: str

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    @property
    def algorithm(self) -> Algorithm:
        return algorithm_of(self.public_key)

    def verify(self, signature: bytes, message: bytes) -> bool:
        try:
            if isinstance(self.public_key, ed25519.Ed25519PublicKey):
                self.public_key.verify(signature, message)
            else:
                self.public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclass(frozen=True)
class KeyPairPaths:
    private: Path
    public: Path


def write_key_pair(prefix: Path, algorithm: Algorithm, passphrase: bytes | None = None) -> KeyPairPaths:
    """Write PREFIX.key (0600) and PREFIX.pub; never overwrite an existing key."""
    paths = KeyPairPaths(prefix.with_name(prefix.name + PRIVATE_SUFFIX), prefix.with_name(prefix.name + ".pub"))
    for path in (paths.private, paths.public):
        if path.exists():
            raise BadInputError(f"{path}: already exists; refusing to overwrite a key")
    private_key = generate(algorithm)
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    private_pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(paths.private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(private_pem)
        os.chmod(paths.private, 0o600)  # the umask may have narrowed it further; never wider
        atomic.write_file(paths.public, public_pem(private_key.public_key()))
    except OSError as exc:
        raise BadInputError(f"{prefix}: cannot write key pair: {exc.strerror}") from exc
    return paths


def _read_key_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path}: key file not found") from exc
    except IsADirectoryError as exc:
        raise BadInputError(f"{path}: is a directory, expected a key file") from exc
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read key: {exc.strerror}") from exc


def _unsupported(path: Path, key: object) -> BadInputError:
    kind = type(key).__name__.removeprefix("_").replace("PrivateKey", "").replace("PublicKey", "") or "unknown"
    return BadInputError(allowed_values_message(str(path), "key algorithm", kind, [a.value for a in Algorithm]))


def _check_supported(path: Path, key: object) -> None:
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) and not isinstance(
        key.curve, ec.SECP256R1
    ):
        raise BadInputError(
            allowed_values_message(str(path), "elliptic curve", key.curve.name, [a.value for a in Algorithm])
        )


def load_signer(path: Path, passphrase: bytes | None = None, *, passphrase_env: str = PASSPHRASE_ENV) -> KeySigner:
    """Load a private key file; the message names the file and the variable the passphrase comes from."""
    data = _read_key_bytes(path)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase or None)
    except TypeError as exc:
        if passphrase:
            raise BadInputError(f"{path}: key is not encrypted but a passphrase was given") from exc
        raise BadInputError(f"{path}: key is encrypted; set {passphrase_env}") from exc
    except ValueError as exc:
        if passphrase and b"ENCRYPTED" in data:
            raise BadInputError(f"{path}: wrong passphrase ({passphrase_env})") from exc
        raise BadInputError(f"{path}: not a PEM private key") from exc
    except UnsupportedAlgorithm as exc:
        raise BadInputError(f"{path}: unsupported key type") from exc
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey):
        raise _unsupported(path, key)
    _check_supported(path, key)
    return KeySigner(key)


def load_public_key(path: Path) -> TrustedKey:
    data = _read_key_bytes(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        hint = " (this is a private key; pass the .pub file)" if b"PRIVATE KEY" in data else ""
        raise BadInputError(f"{path}: not a PEM public key{hint}") from exc
    if not isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey):
        raise _unsupported(path, key)
    _check_supported(path, key)
    return TrustedKey(key, str(path))


def load_trusted_keys(directory: Path) -> list[TrustedKey]:
    """Every *.pub / *.pem file in `directory`, in name order."""
    if not directory.is_dir():
        if directory.exists():
            raise BadInputError(f"{directory}: not a directory of trusted keys")
        raise NotFoundError(f"{directory}: trusted-keys directory not found")
    files = sorted(p for p in directory.iterdir() if p.suffix in PUBLIC_SUFFIXES and p.is_file())
    if not files:
        raise BadInputError(f"{directory}: no public keys (*.pub, *.pem) in the trusted-keys directory")
    return [load_public_key(p) for p in files]
