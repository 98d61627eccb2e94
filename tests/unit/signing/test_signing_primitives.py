"""Area of concern: the signing building blocks — key files (0600, passphrases, refusal to
overwrite, unsupported keys), DSSE pre-authentication encoding, statements that other areas
sign with their own predicate types, and the Sigstore bundle form."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from dsx.errors import BadInputError, NotFoundError
from dsx.files import signing as signing_files
from dsx.signing import dsse, sigstore
from dsx.signing.signer import Algorithm, NoopSigner
from dsx.signing.statement import Statement, Subject, sign_statement, verify_envelope
from dsx.signing.verdict import TamperedError

VALIDITY = "https://dsx.run/validity/v1"


def test_pae_matches_the_dsse_specification() -> None:
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


@pytest.mark.parametrize("algorithm", list(Algorithm))
def test_keygen_writes_a_private_key_only_the_owner_can_read(tmp_path: Path, algorithm: Algorithm) -> None:
    paths = signing_files.write_key_pair(tmp_path / "k", algorithm)
    assert stat.S_IMODE(paths.private.stat().st_mode) == 0o600
    signer = signing_files.load_signer(paths.private)
    trusted = signing_files.load_public_key(paths.public)
    assert signer.key_id == trusted.key_id
    assert trusted.algorithm is algorithm
    assert trusted.verify(signer.sign(b"m"), b"m") and not trusted.verify(signer.sign(b"m"), b"n")


def test_passphrase_protected_key(tmp_path: Path) -> None:
    paths = signing_files.write_key_pair(tmp_path / "k", Algorithm.ECDSA_P256, b"s3cret")
    assert b"ENCRYPTED" in paths.private.read_bytes()
    assert (
        signing_files.load_signer(paths.private, b"s3cret").key_id == signing_files.load_public_key(paths.public).key_id
    )
    with pytest.raises(BadInputError, match="DSX_SIGNING_PASSPHRASE"):
        signing_files.load_signer(paths.private)
    with pytest.raises(BadInputError, match="wrong passphrase"):
        signing_files.load_signer(paths.private, b"guess")


def test_keygen_never_overwrites(tmp_path: Path) -> None:
    signing_files.write_key_pair(tmp_path / "k", Algorithm.ED25519)
    before = (tmp_path / "k.key").read_bytes()
    with pytest.raises(BadInputError, match="refusing to overwrite"):
        signing_files.write_key_pair(tmp_path / "k", Algorithm.ED25519)
    assert (tmp_path / "k.key").read_bytes() == before


def test_unsupported_and_wrong_key_files_are_named(tmp_path: Path) -> None:
    rsa_pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (tmp_path / "rsa.pub").write_bytes(rsa_pem)
    with pytest.raises(
        BadInputError, match=r"rsa\.pub: key algorithm: 'RSA' is not allowed; allowed values: ed25519, ecdsa-p256"
    ):
        signing_files.load_public_key(tmp_path / "rsa.pub")
    p384 = (
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (tmp_path / "p384.pub").write_bytes(p384)
    with pytest.raises(BadInputError, match="secp384r1"):
        signing_files.load_public_key(tmp_path / "p384.pub")
    paths = signing_files.write_key_pair(tmp_path / "k", Algorithm.ED25519)
    with pytest.raises(BadInputError, match=r"pass the \.pub file"):
        signing_files.load_public_key(paths.private)
    with pytest.raises(NotFoundError):
        signing_files.load_signer(tmp_path / "absent.key")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match="no public keys"):
        signing_files.load_trusted_keys(tmp_path / "empty")


def test_statement_with_another_predicate_type_round_trips(tmp_path: Path) -> None:
    """What certification does: subjects recipe/snapshot/report digests, a validity predicate."""
    signer = signing_files.load_signer(signing_files.write_key_pair(tmp_path / "k", Algorithm.ED25519).private)
    trusted = [signing_files.load_public_key(tmp_path / "k.pub")]
    subjects = [Subject("recipe", {"sha256": "a" * 64}), Subject("report.json", {"sha256": "b" * 64})]
    envelope = sign_statement(subjects, VALIDITY, {"verdict": "pass", "busbwGbps": 412.5}, signer)
    verified = verify_envelope(envelope, trusted, source="t", predicate_types={VALIDITY})
    assert verified.statement.subjects == tuple(subjects)
    assert verified.statement.predicate["verdict"] == "pass"
    with pytest.raises(TamperedError, match="predicate type"):
        verify_envelope(envelope, trusted, source="t", predicate_types={"https://slsa.dev/provenance/v1"})
    again = sign_statement(subjects, VALIDITY, {"verdict": "pass", "busbwGbps": 412.5}, signer)
    assert again.to_json_line() == envelope.to_json_line()  # Ed25519 over canonical JSON: reproducible


def test_noop_signer_builds_envelopes_no_key_verifies(tmp_path: Path) -> None:
    envelope = sign_statement([Subject.of_bytes("f", b"x")], VALIDITY, {}, NoopSigner())
    assert envelope.signatures[0].key_id == "noop"
    statement = Statement.from_payload(envelope.payload, source="t")
    assert statement.subjects[0].digest["sha256"] == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    trusted = [signing_files.load_public_key(signing_files.write_key_pair(tmp_path / "k", Algorithm.ED25519).public)]
    with pytest.raises(TamperedError, match="not trusted"):
        verify_envelope(envelope, trusted, source="t")


def test_sigstore_bundle_carries_the_key_hint_and_the_same_envelope(tmp_path: Path) -> None:
    signer = signing_files.load_signer(signing_files.write_key_pair(tmp_path / "k", Algorithm.ECDSA_P256).private)
    envelope = sign_statement([Subject.of_bytes("f", b"x")], VALIDITY, {}, signer)
    document = json.loads(sigstore.dump_bundle(envelope))
    assert document["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert document["verificationMaterial"] == {"publicKey": {"hint": signer.key_id}, "tlogEntries": []}
    assert sigstore.envelope_of(document, source="b") == envelope
    with pytest.raises(BadInputError, match="not a Sigstore bundle"):
        sigstore.envelope_of({"mediaType": "x"}, source="b")


def test_malformed_envelopes_are_named() -> None:
    with pytest.raises(BadInputError, match="no signatures"):
        dsse.Envelope.from_dict({"payloadType": "t", "payload": "", "signatures": []}, source="e")
    with pytest.raises(BadInputError, match="base64"):
        dsse.Envelope.from_dict({"payloadType": "t", "payload": "!!", "signatures": [{"sig": ""}]}, source="e")
