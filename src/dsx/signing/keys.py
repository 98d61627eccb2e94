"""Keys: create, decode and identify Ed25519 and ECDSA P-256 keys, as PEM bytes.

Private keys are PKCS#8 PEM, encrypted when a passphrase is given. Public keys are PEM
SubjectPublicKeyInfo, the form cosign and openssl read. The key files themselves (the private
one created with mode 0600 before a byte is written) are read and written by `dsx.files.signing`,
which passes the file name in as `source` so every error still names it. A key's id is the
sha256 hex of its re-serialised public PEM, the same value a Sigstore bundle carries as its
public-key hint, so the id does not depend on how a file was line-wrapped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from dsx.errors import BadInputError, allowed_values_message
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


def new_key_pair(algorithm: Algorithm, passphrase: bytes | None = None) -> tuple[bytes, bytes]:
    """A fresh key pair as (private PKCS#8 PEM, encrypted when a passphrase is given; public PEM)."""
    private_key = generate(algorithm)
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    private_pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return private_pem, public_pem(private_key.public_key())


def _unsupported(source: str, key: object) -> BadInputError:
    kind = type(key).__name__.removeprefix("_").replace("PrivateKey", "").replace("PublicKey", "") or "unknown"
    return BadInputError(allowed_values_message(source, "key algorithm", kind, [a.value for a in Algorithm]))


def _check_supported(source: str, key: object) -> None:
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) and not isinstance(
        key.curve, ec.SECP256R1
    ):
        raise BadInputError(
            allowed_values_message(source, "elliptic curve", key.curve.name, [a.value for a in Algorithm])
        )


def signer_from_pem(
    data: bytes, source: str, passphrase: bytes | None = None, *, passphrase_env: str = PASSPHRASE_ENV
) -> KeySigner:
    """A private key's PEM bytes; the message names `source` (the file) and the passphrase's variable."""
    try:
        key = serialization.load_pem_private_key(data, password=passphrase or None)
    except TypeError as exc:
        if passphrase:
            raise BadInputError(f"{source}: key is not encrypted but a passphrase was given") from exc
        raise BadInputError(f"{source}: key is encrypted; set {passphrase_env}") from exc
    except ValueError as exc:
        if passphrase and b"ENCRYPTED" in data:
            raise BadInputError(f"{source}: wrong passphrase ({passphrase_env})") from exc
        raise BadInputError(f"{source}: not a PEM private key") from exc
    except UnsupportedAlgorithm as exc:
        raise BadInputError(f"{source}: unsupported key type") from exc
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey):
        raise _unsupported(source, key)
    _check_supported(source, key)
    return KeySigner(key)


def trusted_key_from_pem(data: bytes, source: str) -> TrustedKey:
    """A public key's PEM bytes, trusted as coming from `source` (the file, named in errors)."""
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        hint = " (this is a private key; pass the .pub file)" if b"PRIVATE KEY" in data else ""
        raise BadInputError(f"{source}: not a PEM public key{hint}") from exc
    if not isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey):
        raise _unsupported(source, key)
    _check_supported(source, key)
    return TrustedKey(key, source)
