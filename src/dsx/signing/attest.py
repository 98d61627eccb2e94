"""Attach attestations: to a bundle (in memory or on disk) and to a single file such as a recipe.

A bundle is signed only if it is intact, so a signature never vouches for bytes that already
differ from their checksums. The attestation is written twice with the same envelope: as
in-toto JSON lines for in-toto tooling and as a Sigstore bundle for cosign.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsx import atomic, serialization
from dsx.errors import BadInputError, CheckFailedError
from dsx.file_tree import FileTree, read_tree
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


def bundle_envelope(tree: FileTree, signer: Signer | Sequence[Signer]) -> Envelope:
    """Sign checksums.txt and bundle.json of an intact bundle tree."""
    findings, _ = verify.integrity_findings(tree)
    if findings:
        raise CheckFailedError("refusing to sign a bundle that fails its checksums: " + "; ".join(map(str, findings)))
    manifest = verify.read_manifest(tree)
    assert manifest is not None  # integrity_findings reports a missing or broken bundle.json
    recipe_file = str(manifest.get("recipe", {}).get("file", layout.RECIPE_COPY))
    recipe_bytes = tree.files.get(recipe_file, b"")
    predicate = provenance.bundle_predicate(manifest, hashlib.sha256(recipe_bytes).hexdigest())
    subjects = [Subject.of_bytes(name, tree.files[name]) for name in (layout.CHECKSUMS, layout.MANIFEST)]
    return sign_statement(subjects, provenance.SLSA_PROVENANCE_V1, predicate, signer)


def attest_bundle(tree: FileTree, signer: Signer | Sequence[Signer]) -> FileTree:
    """The same tree with fresh attestation files (any earlier ones replaced)."""
    kept = {p: b for p, b in tree.files.items() if not layout.is_attestation(p)}
    envelope = bundle_envelope(FileTree(kept, tree.executables), signer)
    return FileTree({**kept, **attestation_files(envelope)}, tree.executables)


def sign_bundle_directory(directory: Path, signer: Signer | Sequence[Signer]) -> list[Path]:
    """Write attestation/ into an existing bundle directory; returns the files written."""
    contents = read_tree(directory)
    if contents.irregular:
        raise CheckFailedError(f"{directory}: refusing to sign: {contents.irregular[0]} is not a regular file")
    kept = {p: b for p, b in contents.tree.files.items() if not layout.is_attestation(p)}
    envelope = bundle_envelope(FileTree(kept), signer)
    written = []
    for rel, data in attestation_files(envelope).items():
        written.append(_write(directory / rel, data))
    for stale in set(layout.ATTESTATION_FILES) - set(attestation_files(envelope)):
        (directory / stale).unlink(missing_ok=True)
    return written


def sign_file(path: Path, signer: Signer | Sequence[Signer], *, created_at: str | None = None) -> list[Path]:
    """Sign a recipe file; the attestations go beside it as FILE.intoto.jsonl and FILE.sigstore.json."""
    document = _recipe_document(path)
    data = path.read_bytes()
    generator = str(document.get("metadata", {}).get("generator") or "dsx")
    predicate = provenance.recipe_predicate(document, generator, created_at)
    envelope = sign_statement([Subject.of_bytes(path.name, data)], provenance.SLSA_PROVENANCE_V1, predicate, signer)
    intoto_path, sigstore_path = verify.sidecar_paths(path)
    written = [_write(intoto_path, envelope.to_json_line())]
    if len(envelope.signatures) == 1:
        written.append(_write(sigstore_path, sigstore.dump_bundle(envelope)))
    return written


def _recipe_document(path: Path) -> Mapping[str, Any]:
    document = serialization.load_mapping_file(path)
    if document.get("kind") != "Recipe":
        raise BadInputError(f"{path}: not a dsx recipe (kind {document.get('kind')!r}); sign a recipe or a bundle")
    return document


def _write(path: Path, data: bytes) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_file(path, data)
    except OSError as exc:
        raise BadInputError(f"{path}: cannot write: {exc.strerror}") from exc
    return path


def attest_beside(
    primary: Path, subjects: Mapping[str, Path], predicate_type: str, claims: Mapping[str, Any], signer: Signer
) -> dict[Path, str]:
    """Sign the files in `subjects` (role → path, all beside `primary`) under one predicate.

    Returns the sidecars to write: `<primary>.intoto.jsonl` holds the DSSE envelope,
    `<primary>.sigstore.json` the same as a Sigstore bundle; the caller writes them (rendering
    stays free of side effects). A validation report is attested this way (dsx.validation.attestation).
    """
    base = primary.parent.resolve()
    signed = []
    for role, path in subjects.items():
        if path.parent.resolve() != base:
            raise BadInputError(f"{path}: the {role} must sit beside {primary.name} to be attested")
        try:
            signed.append(Subject.of_bytes(path.name, path.read_bytes()))
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read the {role}: {exc.strerror}") from exc
    envelope = sign_statement(signed, predicate_type, dict(claims), signer)
    intoto_path, sigstore_path = verify.sidecar_paths(primary)
    return {
        intoto_path: envelope.to_json_line().decode("utf-8"),
        sigstore_path: sigstore.dump_bundle(envelope).decode("utf-8"),
    }
