"""DSSE envelopes: the signature wrapper in-toto and Sigstore share.

A signature covers the pre-authentication encoding (PAE) of payload type and payload, never
the JSON around them, so re-indenting an envelope does not break it and a payload cannot be
reinterpreted under another type.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsx.errors import BadInputError
from dsx.signing.signer import Signer, Verifier

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSEv1 pre-authentication encoding."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True)
class Signature:
    key_id: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "payload": _b64(self.payload),
            "payloadType": self.payload_type,
            "signatures": [{"keyid": s.key_id, "sig": _b64(s.sig)} for s in self.signatures],
        }

    def to_json_line(self) -> bytes:
        """One compact JSON line, the unit of an in-toto `.intoto.jsonl` file."""
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True).encode("utf-8") + b"\n"

    @classmethod
    def from_dict(cls, data: object, *, source: str) -> Envelope:
        if not isinstance(data, Mapping):
            raise BadInputError(f"{source}: DSSE envelope must be a JSON object")
        payload_type = data.get("payloadType")
        if not isinstance(payload_type, str) or not payload_type:
            raise BadInputError(f"{source}: DSSE envelope: payloadType missing")
        raw_signatures = data.get("signatures")
        if not isinstance(raw_signatures, list) or not raw_signatures:
            raise BadInputError(f"{source}: DSSE envelope: no signatures")
        signatures = []
        for n, item in enumerate(raw_signatures):
            if not isinstance(item, Mapping):
                raise BadInputError(f"{source}: DSSE envelope: signatures[{n}] must be an object")
            keyid = item.get("keyid", "")
            signatures.append(
                Signature(
                    key_id=keyid if isinstance(keyid, str) else "",
                    sig=_unb64(item.get("sig"), f"{source}: signatures[{n}].sig"),
                )
            )
        return cls(payload_type, _unb64(data.get("payload"), f"{source}: payload"), tuple(signatures))


def sign(payload_type: str, payload: bytes, signers: Sequence[Signer]) -> Envelope:
    message = pae(payload_type, payload)
    return Envelope(payload_type, payload, tuple(Signature(s.key_id, s.sign(message)) for s in signers))


@dataclass(frozen=True)
class SignatureCheck:
    """Which signatures verified, which came from keys nobody trusts, which are forged or broken."""

    verified: tuple[str, ...]
    untrusted: tuple[str, ...]
    invalid: tuple[str, ...]


def check(envelope: Envelope, trusted: Sequence[Verifier]) -> SignatureCheck:
    """Match each signature to trusted keys by key id (all keys when the id is empty)."""
    message = pae(envelope.payload_type, envelope.payload)
    verified: list[str] = []
    untrusted: list[str] = []
    invalid: list[str] = []
    for signature in envelope.signatures:
        candidates = [k for k in trusted if not signature.key_id or k.key_id == signature.key_id]
        if not candidates:
            untrusted.append(signature.key_id or "(no key id)")
            continue
        good = next((k for k in candidates if k.verify(signature.sig, message)), None)
        if good is not None:
            verified.append(good.key_id)
        else:
            invalid.append(signature.key_id or "(no key id)")
    return SignatureCheck(tuple(verified), tuple(untrusted), tuple(invalid))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object, where: str) -> bytes:
    if not isinstance(value, str):
        raise BadInputError(f"{where}: expected a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise BadInputError(f"{where}: not valid base64") from exc
