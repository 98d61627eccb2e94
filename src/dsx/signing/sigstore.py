"""The same DSSE envelope as a Sigstore bundle v0.3, for cosign and other Sigstore verifiers.

Key-signed, no transparency-log entry: `verificationMaterial.publicKey.hint` is the key id
(sha256 hex of the public PEM), which is how cosign's `--key` path and sigstore's
model-transparency match a bundle to a key offline (`--insecure-ignore-tlog`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsx.errors import BadInputError
from dsx.signing import dsse

MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def to_bundle(envelope: dsse.Envelope) -> dict[str, Any]:
    """Sigstore bundle JSON (protobuf-JSON field names) for a single-signature envelope."""
    if len(envelope.signatures) != 1:
        raise BadInputError(f"a Sigstore bundle holds exactly one signature, got {len(envelope.signatures)}")
    wire = envelope.to_dict()
    # the key travels as the hint; cosign skips a signature whose keyid differs from its own notion of the id
    for signature in wire["signatures"]:
        signature["keyid"] = ""
    return {
        "mediaType": MEDIA_TYPE,
        "verificationMaterial": {
            "publicKey": {"hint": envelope.signatures[0].key_id},
            "tlogEntries": [],
        },
        "dsseEnvelope": wire,
    }


def dump_bundle(envelope: dsse.Envelope) -> bytes:
    return json.dumps(to_bundle(envelope), indent=2, sort_keys=True).encode("utf-8") + b"\n"


def envelope_of(data: object, *, source: str) -> dsse.Envelope:
    """The DSSE envelope inside a Sigstore bundle; the key hint stands in for an empty key id."""
    if not isinstance(data, Mapping):
        raise BadInputError(f"{source}: Sigstore bundle must be a JSON object")
    media_type = data.get("mediaType")
    if not isinstance(media_type, str) or not media_type.startswith("application/vnd.dev.sigstore.bundle"):
        raise BadInputError(f"{source}: not a Sigstore bundle (mediaType {media_type!r})")
    envelope = dsse.Envelope.from_dict(data.get("dsseEnvelope"), source=f"{source}: dsseEnvelope")
    material = data.get("verificationMaterial")
    hint = ""
    if isinstance(material, Mapping) and isinstance(material.get("publicKey"), Mapping):
        raw_hint = material["publicKey"].get("hint", "")
        hint = raw_hint if isinstance(raw_hint, str) else ""
    signatures = tuple(dsse.Signature(s.key_id or hint, s.sig) for s in envelope.signatures)
    return dsse.Envelope(envelope.payload_type, envelope.payload, signatures)
