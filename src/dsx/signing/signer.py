"""What signing needs from a key, so envelopes can be built without knowing where keys live.

A local key file, a PKCS#11 token or a KMS key all fit the same three members. `NoopSigner`
is the unit-test fake: it produces envelopes whose plumbing can be inspected but that no
trusted key will ever verify.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class Algorithm(enum.StrEnum):
    """Signature algorithms dsx creates and verifies."""

    ED25519 = "ed25519"
    ECDSA_P256 = "ecdsa-p256"


class Signer(Protocol):
    """Signs bytes with one private key."""

    @property
    def key_id(self) -> str:
        """Stable identifier of the public key (sha256 hex of its PEM SubjectPublicKeyInfo)."""
        ...

    @property
    def public_key_pem(self) -> bytes:
        """The public half, PEM SubjectPublicKeyInfo."""
        ...

    def sign(self, message: bytes) -> bytes:
        """Raw signature over `message` (Ed25519 bytes, or DER ECDSA over SHA-256)."""
        ...


class Verifier(Protocol):
    """Checks signatures made by one public key."""

    @property
    def key_id(self) -> str: ...

    @property
    def source(self) -> str:
        """Where the key came from (a file path), for messages."""
        ...

    def verify(self, signature: bytes, message: bytes) -> bool: ...


@dataclass(frozen=True)
class NoopSigner:
    """Test fake: a fixed, empty signature under a made-up key id."""

    key_id: str = "noop"
    public_key_pem: bytes = b""

    def sign(self, message: bytes) -> bytes:
        return b""
