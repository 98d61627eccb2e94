"""Area of concern: signing a single recipe file and verifying it, or a standalone attestation
with the files it names beside it; a changed recipe or a wrong key is caught by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsx.errors import BadInputError
from dsx.files import signing as signing_files
from dsx.signing import keys
from dsx.signing.verdict import TrustLevel

SMALL_RECIPE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"


@pytest.fixture
def signed_recipe(tmp_path: Path, key_pairs: dict[str, tuple[Path, Path]], algorithm_name: str) -> Path:
    recipe = tmp_path / "recipe.yaml"
    shutil.copy(SMALL_RECIPE, recipe)
    written = signing_files.sign_file(recipe, signing_files.load_signer(key_pairs[algorithm_name][0]))
    assert [p.name for p in written] == ["recipe.yaml.intoto.jsonl", "recipe.yaml.sigstore.json"]
    return recipe


def test_signed_recipe_verifies(signed_recipe: Path, trusted: list[keys.TrustedKey]) -> None:
    verdict = signing_files.verify_path(signed_recipe, trusted)
    assert verdict.level is TrustLevel.VERIFIED, verdict.findings
    attestation = signed_recipe.with_name("recipe.yaml.intoto.jsonl")
    assert signing_files.verify_path(attestation, trusted).level is TrustLevel.VERIFIED


def test_edited_recipe_is_named(signed_recipe: Path, trusted: list[keys.TrustedKey]) -> None:
    signed_recipe.write_text(signed_recipe.read_text().replace("v25.10.1", "v25.10.2"))
    verdict = signing_files.verify_path(signed_recipe, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert {f.subject for f in verdict.findings} == {"recipe.yaml"}
    standalone = signing_files.verify_path(signed_recipe.with_name("recipe.yaml.sigstore.json"), trusted)
    assert standalone.level is TrustLevel.TAMPERED


def test_recipe_with_wrong_key(signed_recipe: Path, key_pairs: dict[str, tuple[Path, Path]]) -> None:
    verdict = signing_files.verify_path(signed_recipe, [signing_files.load_public_key(key_pairs["other"][1])])
    assert verdict.level is TrustLevel.TAMPERED
    assert all(f.subject.startswith("key ") for f in verdict.findings)


def test_missing_subject_beside_a_standalone_attestation(signed_recipe: Path, trusted: list[keys.TrustedKey]) -> None:
    attestation = signed_recipe.with_name("recipe.yaml.intoto.jsonl")
    moved = signed_recipe.parent / "elsewhere"
    moved.mkdir()
    shutil.move(attestation, moved / attestation.name)
    verdict = signing_files.verify_path(moved / attestation.name, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert verdict.findings[0].subject == "recipe.yaml"


def test_unsigned_recipe(tmp_path: Path, trusted: list[keys.TrustedKey]) -> None:
    recipe = tmp_path / "r.yaml"
    shutil.copy(SMALL_RECIPE, recipe)
    assert signing_files.verify_path(recipe, trusted).level is TrustLevel.UNSIGNED


def test_only_recipes_are_signed_as_files(tmp_path: Path, key_pairs: dict[str, tuple[Path, Path]]) -> None:
    other = tmp_path / "notes.yaml"
    other.write_text("kind: Notes\n")
    with pytest.raises(BadInputError, match="not a dsx recipe"):
        signing_files.sign_file(other, signing_files.load_signer(key_pairs["other"][0]))


@pytest.mark.parametrize("removed", ["recipe.yaml.sigstore.json", "recipe.yaml.intoto.jsonl"])
def test_a_removed_one_of_the_two_signature_files_is_reported(
    signed_recipe: Path, trusted: list[keys.TrustedKey], removed: str
) -> None:
    """Either file alone verifies, so the verdict stands, but the missing one is named."""
    assert signing_files.verify_path(signed_recipe, trusted).notes == ()
    (signed_recipe.parent / removed).unlink()
    verdict = signing_files.verify_path(signed_recipe, trusted)
    assert verdict.level is TrustLevel.VERIFIED
    assert [note.split(":")[0] for note in verdict.notes] == [removed]
    assert "missing" in verdict.notes[0]


def test_a_removed_sigstore_file_of_a_signed_bundle_is_reported(
    signed_bundle: Path, trusted: list[keys.TrustedKey]
) -> None:
    (signed_bundle / "attestation" / "bundle.sigstore.json").unlink()
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.VERIFIED
    assert verdict.notes[0].startswith("attestation/bundle.sigstore.json: missing")
