"""Attestations of a bundle tree and of a single file such as a recipe, as bytes.

A bundle is signed only if it is intact, so a signature never vouches for bytes that already
differ from their checksums. The attestation is written twice with the same envelope: as
in-toto JSON lines for in-toto tooling and as a Sigstore bundle for cosign. Reading the bundle
directory or the recipe and writing the attestations is `dsx.files.signing`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from dsx.errors import BadInputError, CheckFailedError
from dsx.file_tree import FileTree
from dsx.model import bundle_layout as layout
from dsx.signing import provenance, sigstore, verify
from dsx.signing.dsse import Envelope
from dsx.signing.signer import Signer
from dsx.signing.statement import Subject, sign_statement


def attestation_files(envelope: Envelope) -> dict[str, bytes]:
    files = {layout.INTOTO: envelope.to_json_line()}
    if len(envelope.signatures) == 1:
        files[layout.SIGSTORE] = sigstore.dump_bundle(envelope)
    return files


def bundle_envelope(
    tree: FileTree, signer: Signer | Sequence[Signer], freshness: provenance.Freshness | None = None
) -> Envelope:
    """Sign checksums.txt and bundle.json of an intact bundle tree (with a revision and a time when given)."""
    findings, _ = verify.integrity_findings(tree)
    if findings:
        raise CheckFailedError("refusing to sign a bundle that fails its checksums: " + "; ".join(map(str, findings)))
    manifest = verify.read_manifest(tree)
    assert manifest is not None  # integrity_findings reports a missing or broken bundle.json
    recipe_file = str(manifest.get("recipe", {}).get("file", layout.RECIPE_COPY))
    recipe_bytes = tree.files.get(recipe_file, b"")
    predicate = provenance.bundle_predicate(manifest, hashlib.sha256(recipe_bytes).hexdigest())
    if freshness is not None:
        predicate = freshness.stamp(predicate)
    subjects = [Subject.of_bytes(name, tree.files[name]) for name in (layout.CHECKSUMS, layout.MANIFEST)]
    return sign_statement(subjects, provenance.SLSA_PROVENANCE_V1, predicate, signer)


def attest_bundle(
    tree: FileTree, signer: Signer | Sequence[Signer], freshness: provenance.Freshness | None = None
) -> FileTree:
    """The same tree with fresh attestation files (any earlier ones replaced)."""
    kept = {p: b for p, b in tree.files.items() if not layout.is_attestation(p)}
    envelope = bundle_envelope(FileTree(kept, tree.executables), signer, freshness)
    return FileTree({**kept, **attestation_files(envelope)}, tree.executables)


def check_recipe(document: Mapping[str, Any], *, source: str) -> None:
    """Only a dsx recipe is signed as a file (anything else is signed as a bundle or not at all)."""
    if document.get("kind") != "Recipe":
        raise BadInputError(f"{source}: not a dsx recipe (kind {document.get('kind')!r}); sign a recipe or a bundle")


def recipe_sidecars(
    name: str,
    data: bytes,
    document: Mapping[str, Any],
    signer: Signer | Sequence[Signer],
    *,
    created_at: str | None = None,
    freshness: provenance.Freshness | None = None,
) -> dict[str, bytes]:
    """The attestations of recipe file `name` (its bytes and decoded document), by the file name they go under.

    NAME.intoto.jsonl always, NAME.sigstore.json for a single signature.
    """
    generator = str(document.get("metadata", {}).get("generator") or "dsx")
    predicate = provenance.recipe_predicate(document, generator, created_at)
    if freshness is not None:
        predicate = freshness.stamp(predicate)
    envelope = sign_statement([Subject.of_bytes(name, data)], provenance.SLSA_PROVENANCE_V1, predicate, signer)
    intoto_name, sigstore_name = verify.sidecar_names(name)
    sidecars = {intoto_name: envelope.to_json_line()}
    if len(envelope.signatures) == 1:
        sidecars[sigstore_name] = sigstore.dump_bundle(envelope)
    return sidecars
