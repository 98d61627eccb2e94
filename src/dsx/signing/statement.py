"""in-toto Statement v1: what is signed is a list of subject digests plus a typed predicate.

`sign_statement` and `verify_envelope` are the two calls every attestation in dsx goes
through: bundle and recipe provenance here, validity attestations from certification
elsewhere (a different predicate type, the same envelope and keys). The payload is RFC 8785
canonical JSON, so signing the same statement with Ed25519 gives the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError
from dsx.signing import dsse
from dsx.signing.signer import Signer, Verifier
from dsx.signing.verdict import Finding, TamperedError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


@dataclass(frozen=True)
class Subject:
    """A named artifact and its digests (`{"sha256": hex}`)."""

    name: str
    digest: Mapping[str, str]

    @classmethod
    def of_bytes(cls, name: str, data: bytes) -> Subject:
        return cls(name, {"sha256": hashlib.sha256(data).hexdigest()})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "digest": dict(sorted(self.digest.items()))}


@dataclass(frozen=True)
class Statement:
    subjects: tuple[Subject, ...]
    predicate_type: str
    predicate: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "_type": STATEMENT_TYPE,
            "subject": [s.to_dict() for s in self.subjects],
            "predicateType": self.predicate_type,
            "predicate": dict(self.predicate),
        }

    def to_payload(self) -> bytes:
        return serialization.canonical_json(self.to_dict())

    @classmethod
    def from_payload(cls, payload: bytes, *, source: str) -> Statement:
        data = serialization.parse_json(payload, source=f"{source}: statement")
        if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
            raise BadInputError(f"{source}: not an in-toto Statement v1 (_type must be {STATEMENT_TYPE})")
        raw_subjects = data.get("subject")
        if not isinstance(raw_subjects, list) or not raw_subjects:
            raise BadInputError(f"{source}: statement has no subject")
        subjects = []
        for n, item in enumerate(raw_subjects):
            name = item.get("name") if isinstance(item, dict) else None
            digest = item.get("digest") if isinstance(item, dict) else None
            if (
                not isinstance(name, str)
                or not isinstance(digest, dict)
                or not digest
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in digest.items())
            ):
                raise BadInputError(f"{source}: subject[{n}] needs a name and a digest map")
            subjects.append(Subject(name, digest))
        predicate_type = data.get("predicateType")
        predicate = data.get("predicate", {})
        if not isinstance(predicate_type, str) or not isinstance(predicate, dict):
            raise BadInputError(f"{source}: statement needs a predicateType and an object predicate")
        return cls(tuple(subjects), predicate_type, predicate)


@dataclass(frozen=True)
class VerifiedStatement:
    statement: Statement
    key_ids: tuple[str, ...]


def sign_statement(
    subjects: Sequence[Subject],
    predicate_type: str,
    predicate: Mapping[str, Any],
    signer: Signer | Sequence[Signer],
) -> dsse.Envelope:
    """A DSSE envelope over an in-toto Statement v1, signed by one or more signers."""
    if not subjects:
        raise BadInputError("a statement needs at least one subject")
    signers = [signer] if not isinstance(signer, Sequence) else list(signer)
    statement = Statement(tuple(subjects), predicate_type, predicate)
    return dsse.sign(dsse.IN_TOTO_PAYLOAD_TYPE, statement.to_payload(), signers)


def verify_envelope(
    envelope: dsse.Envelope,
    trusted_keys: Sequence[Verifier],
    *,
    source: str,
    predicate_types: Collection[str] | None = None,
) -> VerifiedStatement:
    """Check the signatures and decode the statement; raise `TamperedError` naming key or file.

    Every signature made by a trusted key must verify (a swapped or forged signature under a
    trusted key id is tampering even when another signature is good), and at least one must.
    Subject digests are the caller's to compare: only it knows where the subjects live.
    """
    if envelope.payload_type != dsse.IN_TOTO_PAYLOAD_TYPE:
        raise TamperedError([Finding(source, f"payload type {envelope.payload_type!r}, expected in-toto")])
    result = dsse.check(envelope, trusted_keys)
    findings = [Finding(f"key {k}", f"signature in {source} does not match its statement") for k in result.invalid]
    if not result.verified:
        findings += [Finding(f"key {k}", "signed by a key that is not trusted") for k in result.untrusted]
    if findings:
        raise TamperedError(findings)
    try:
        statement = Statement.from_payload(envelope.payload, source=source)
    except BadInputError as exc:
        raise TamperedError([Finding(source, str(exc).removeprefix(f"{source}: "))]) from exc
    if predicate_types is not None and statement.predicate_type not in predicate_types:
        allowed = ", ".join(sorted(predicate_types))
        raise TamperedError([Finding(source, f"predicate type {statement.predicate_type!r} not in {allowed}")])
    return VerifiedStatement(statement, result.verified)
