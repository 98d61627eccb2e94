"""Area of concern: offline verification of bundles — a clean signed bundle is `verified`, and
every kind of tampering (a changed byte in any file, an added or removed file, a swapped
signature, the wrong key, an edited checksums.txt or attestation) is `tampered`, naming the
offending file or key."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from dsx import file_tree as tree
from dsx.errors import BadInputError
from dsx.files import signing as signing_files
from dsx.model import bundle_layout as layout
from dsx.signing import attest, keys, verify
from dsx.signing.signer import Algorithm
from dsx.signing.verdict import TrustLevel


def _subjects(verdict: verify.Verdict) -> set[str]:
    return {f.subject for f in verdict.findings}


def test_clean_signed_bundle_verifies(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.VERIFIED, verdict.findings
    assert verdict.signed_by == (trusted[0].key_id,)
    assert verdict.exit_code == 0
    assert verdict.files_checked == len(tree.read_tree(signed_bundle).tree.files) - 3  # checksums + 2 attestations


def test_a_changed_byte_in_any_file_is_named(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    files = sorted(tree.read_tree(signed_bundle).tree.files)
    assert len(files) > 10
    for rel in files:
        path = signed_bundle / rel
        original = path.read_bytes()
        path.write_bytes(bytes([original[0] ^ 0x01]) + original[1:])
        verdict = signing_files.verify_path(signed_bundle, trusted)
        path.write_bytes(original)
        assert verdict.level is TrustLevel.TAMPERED, rel
        if layout.is_attestation(rel):  # a broken signature names its key and the file it sits in
            assert any(rel in str(f) for f in verdict.findings), (rel, verdict.findings)
        else:
            assert rel in _subjects(verdict), (rel, verdict.findings)
    assert signing_files.verify_path(signed_bundle, trusted).level is TrustLevel.VERIFIED


@pytest.mark.parametrize("rel", [layout.INTOTO, layout.SIGSTORE])
def test_a_flipped_signature_bit_names_the_key_and_the_file(
    signed_bundle: Path, trusted: list[keys.TrustedKey], rel: str
) -> None:
    path = signed_bundle / rel
    document = json.loads(path.read_text())
    envelope = document.get("dsseEnvelope", document)
    signature = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    signature[len(signature) // 2] ^= 0x01
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(signature)).decode()
    path.write_text(json.dumps(document) + "\n")

    verdict = signing_files.verify_path(signed_bundle, trusted)

    assert verdict.level is TrustLevel.TAMPERED
    broken = [f for f in verdict.findings if f.subject == f"key {trusted[0].key_id}"]
    assert broken, verdict.findings
    assert rel in broken[0].problem


@pytest.mark.parametrize("rel", ["extra.yaml", "gpu-operator/extra.yaml", "attestation/extra.json"])
def test_an_added_file_is_named(signed_bundle: Path, trusted: list[keys.TrustedKey], rel: str) -> None:
    (signed_bundle / rel).write_text("kind: Surprise\n")
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert rel in _subjects(verdict)


@pytest.mark.parametrize("rel", ["gpu-operator/values.yaml", "recipe.yaml", "checksums.txt", "bundle.json"])
def test_a_removed_file_is_named(signed_bundle: Path, trusted: list[keys.TrustedKey], rel: str) -> None:
    (signed_bundle / rel).unlink()
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert rel in _subjects(verdict)


def test_a_symlink_is_tampering(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    (signed_bundle / "link.yaml").symlink_to("/etc/hostname")
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert "link.yaml" in _subjects(verdict)


def test_edited_checksums_that_match_an_edited_file_break_the_signature(
    signed_bundle: Path, trusted: list[keys.TrustedKey]
) -> None:
    values = signed_bundle / "gpu-operator" / "values.yaml"
    values.write_text("driver: {enabled: false}\n")
    lines = (signed_bundle / layout.CHECKSUMS).read_text().splitlines()
    import hashlib

    digest = hashlib.sha256(values.read_bytes()).hexdigest()
    fixed = [
        f"{digest}  gpu-operator/values.yaml" if line.endswith("  gpu-operator/values.yaml") else line for line in lines
    ]
    (signed_bundle / layout.CHECKSUMS).write_text("\n".join(fixed) + "\n")
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert _subjects(verdict) == {layout.CHECKSUMS}


def test_the_wrong_key_is_named(signed_bundle: Path, key_pairs: dict[str, tuple[Path, Path]]) -> None:
    other = signing_files.load_public_key(key_pairs["other"][1])
    verdict = signing_files.verify_path(signed_bundle, [other])
    assert verdict.level is TrustLevel.TAMPERED
    assert any(s.startswith("key ") for s in _subjects(verdict))
    assert other.key_id not in " ".join(_subjects(verdict))  # names the signer's key, not the trusted one


def test_a_swapped_signature_is_named(
    signed_bundle: Path, trusted: list[keys.TrustedKey], key_pairs: dict[str, tuple[Path, Path]], algorithm_name: str
) -> None:
    # a valid signature by the same key, but over a different statement (the recipe file's)
    signer = signing_files.load_signer(key_pairs[algorithm_name][0])
    recipe_copy = signed_bundle.parent / "r.yaml"
    recipe_copy.write_bytes((signed_bundle / layout.RECIPE_COPY).read_bytes())
    signing_files.sign_file(recipe_copy, signer)
    foreign = json.loads((signed_bundle.parent / "r.yaml.intoto.jsonl").read_text())
    envelope = json.loads((signed_bundle / layout.INTOTO).read_text())
    envelope["signatures"][0]["sig"] = foreign["signatures"][0]["sig"]
    (signed_bundle / layout.INTOTO).write_text(json.dumps(envelope) + "\n")
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert f"key {trusted[0].key_id}" in _subjects(verdict)


def test_an_edited_attestation_payload_is_caught(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    envelope = json.loads((signed_bundle / layout.INTOTO).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (signed_bundle / layout.INTOTO).write_text(json.dumps(envelope) + "\n")
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert f"key {trusted[0].key_id}" in _subjects(verdict)


def test_an_attestation_that_is_not_json_is_named(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    (signed_bundle / layout.SIGSTORE).write_text("{not json")
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert layout.SIGSTORE in _subjects(verdict)


def test_unsigned_bundle_is_unsigned_not_verified(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    for rel in layout.ATTESTATION_FILES:
        (signed_bundle / rel).unlink()
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.UNSIGNED
    assert verdict.exit_code == 1


def test_signed_bundle_without_trusted_keys_is_not_verified(signed_bundle: Path) -> None:
    verdict = signing_files.verify_path(signed_bundle, [])
    assert verdict.level is TrustLevel.UNSIGNED
    assert "no trusted key" in verdict.notes[0]


def test_signing_refuses_a_bundle_that_fails_its_checksums(
    signed_bundle: Path, key_pairs: dict[str, tuple[Path, Path]]
) -> None:
    (signed_bundle / "README.md").write_text("changed")
    with pytest.raises(Exception, match="refusing to sign"):
        signing_files.sign_bundle_directory(signed_bundle, signing_files.load_signer(key_pairs["other"][0]))


def test_resigning_a_directory_with_another_key(signed_bundle: Path, key_pairs: dict[str, tuple[Path, Path]]) -> None:
    signing_files.sign_bundle_directory(signed_bundle, signing_files.load_signer(key_pairs["other"][0]))
    other = signing_files.load_public_key(key_pairs["other"][1])
    assert signing_files.verify_path(signed_bundle, [other]).level is TrustLevel.VERIFIED


def test_not_a_bundle_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(BadInputError, match="not a dsx bundle"):
        signing_files.verify_path(tmp_path, [])
    with pytest.raises(BadInputError, match="not found"):
        signing_files.verify_path(tmp_path / "missing", [])


def test_the_domain_signs_and_verifies_a_recipe_in_memory_without_touching_a_file() -> None:
    private_pem, public_pem = keys.new_key_pair(Algorithm.ED25519)
    signer = keys.signer_from_pem(private_pem, "memory.key")
    trusted = [keys.trusted_key_from_pem(public_pem, "memory.pub")]
    recipe = b"apiVersion: dsx.nvidia.com/v1alpha1\nkind: Recipe\nmetadata: {name: r}\n"
    document = {"kind": "Recipe", "metadata": {"name": "r"}}
    sidecars = attest.recipe_sidecars("r.yaml", recipe, document, signer, created_at="2026-01-01T00:00:00Z")
    assert list(sidecars) == ["r.yaml.intoto.jsonl", "r.yaml.sigstore.json"]
    beside = {"r.yaml": recipe}
    verdict = verify.verify_signed("r.yaml", "r.yaml", sidecars, beside.get, trusted)
    assert verdict.level is TrustLevel.VERIFIED and verdict.signed_by == (signer.key_id,)
    beside["r.yaml"] = recipe + b"# edited\n"
    assert verify.verify_signed("r.yaml", "r.yaml", sidecars, beside.get, trusted).level is TrustLevel.TAMPERED
    with pytest.raises(BadInputError, match=r"^memory\.key: not a PEM private key$"):
        keys.signer_from_pem(public_pem, "memory.key")


def test_no_signing_module_opens_a_file() -> None:
    """File I/O lives in dsx.files.signing; the domain package names no file API."""
    package = Path(verify.__file__).parent
    for module in sorted(package.glob("*.py")):
        text = module.read_text(encoding="utf-8")
        for name in ("import os", "pathlib", "open(", ".read_bytes(", ".write_bytes(", "read_tree", "atomic"):
            assert name not in text, f"{module.name}: {name}"
