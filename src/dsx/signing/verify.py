"""Offline verification of a bundle directory, a signed file, or a standalone attestation.

A bundle is checked as a closed world: every file on disk must be listed in checksums.txt with
a matching digest, every listed file must exist, and nothing but the known attestation files
may sit in attestation/. A signature then vouches for checksums.txt and bundle.json by digest,
so one signature covers every byte. Findings name the file or key at fault; nothing here
touches the network or the disk: `dsx.files.signing` reads what a path names and hands the bytes in.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError
from dsx.file_tree import FileTree
from dsx.model import bundle_layout as layout
from dsx.model import checksums
from dsx.signing import dsse, provenance, sigstore
from dsx.signing.signer import Verifier
from dsx.signing.statement import Statement, VerifiedStatement, verify_envelope
from dsx.signing.verdict import ArtifactKind, Finding, TamperedError, TrustLevel, Verdict

INTOTO_SUFFIX = ".intoto.jsonl"
SIGSTORE_SUFFIX = ".sigstore.json"


@dataclass(frozen=True)
class FreshnessRule:
    """What `dsx verify` asks of a signature's age: a revision at least `min_revision` (from
    `--min-revision` or the last one verified, `source` saying which) and a signing time not
    before `not_before`. A statement that carries neither is older than any rule."""

    min_revision: int | None = None
    not_before: datetime | None = None
    source: str = "--min-revision"

    def findings(self, statement: Statement, where: str) -> list[Finding]:
        carried = provenance.freshness_of(statement.predicate)
        out = []
        if self.min_revision is not None:
            if carried.revision is None:
                out.append(Finding(where, f"signed without a revision; {self.source} asks for {self.min_revision}"))
            elif carried.revision < self.min_revision:
                out.append(
                    Finding(where, f"revision {carried.revision} is older than {self.min_revision} ({self.source})")
                )
        if self.not_before is not None:
            asked = provenance.format_time(self.not_before)
            if carried.signed_at is None:
                out.append(Finding(where, f"signed without a time; --not-before asks for {asked} or later"))
            elif carried.signed_at < self.not_before:
                signed = provenance.format_time(carried.signed_at)
                out.append(Finding(where, f"signed {signed}, before {asked} (--not-before)"))
        return out


def _level(findings: Sequence[Finding], stale: Sequence[Finding], *, signed: bool = True) -> TrustLevel:
    if findings or not signed:
        return TrustLevel.TAMPERED
    return TrustLevel.STALE if stale else TrustLevel.VERIFIED


ReadBeside = Callable[[str], bytes | None]
"""Reads a file beside the one verified, by name; None when it is missing or cannot be read."""


MAX_SMALL_FILE_BYTES = 16 << 20
"""checksums.txt, bundle.json and the attestation files are read whole; one larger is not a dsx one."""

MAX_LISTED_FILE_BYTES = 1 << 30
"""A listed file is hashed in a stream; past 1 GiB (a vendored chart is a few MB) it is not read."""


@dataclass(frozen=True)
class FileFacts:
    """What verification needs of one regular file, without holding its bytes."""

    size_bytes: int
    sha256: str | None
    """None: not read (a file checksums.txt does not list is reported from the listing alone)."""
    mode: int = 0o644
    """Permission bits with setuid, setgid and sticky (`stat.S_IMODE`)."""
    links: int = 1
    script: bool = False
    """Starts with `#!`: a script, which a bundle holds executable."""


@dataclass(frozen=True)
class BundleListing:
    """A bundle as verification sees it: facts per regular file, the few files read whole
    (`small`), and entries that are not regular files (links, devices)."""

    facts: Mapping[str, FileFacts]
    small: Mapping[str, bytes] = field(default_factory=dict)
    irregular: tuple[str, ...] = ()
    unread: Mapping[str, str] = field(default_factory=dict)
    """Files that were not read, and why (larger than a bundle file can be; unreadable)."""

    @classmethod
    def of_tree(cls, tree: FileTree, irregular: Sequence[str] = ()) -> BundleListing:
        """An in-memory bundle, with the modes `write_tree` would give it."""
        facts = {
            path: FileFacts(
                len(data),
                checksums.sha256_hex(data),
                0o755 if path in tree.executables else 0o644,
                1,
                data.startswith(b"#!"),
            )
            for path, data in tree.files.items()
        }
        small = {
            p: tree.files[p] for p in (layout.CHECKSUMS, layout.MANIFEST, *layout.ATTESTATION_FILES) if p in tree.files
        }
        return cls(facts, small, tuple(irregular))


def small_files_wanted(paths: Sequence[str]) -> list[str]:
    """Which of a bundle's paths verification reads whole."""
    return [p for p in paths if p in (layout.CHECKSUMS, layout.MANIFEST) or layout.is_attestation(p)]


def integrity_findings(
    bundle: FileTree | BundleListing, irregular: Sequence[str] = ()
) -> tuple[list[Finding], dict[str, str]]:
    """Closed-world check of a bundle against its checksums.txt; also returns the entries."""
    listing = bundle if isinstance(bundle, BundleListing) else BundleListing.of_tree(bundle, irregular)
    findings = [Finding(p, "not a regular file (link or device)") for p in listing.irregular]
    findings += [Finding(p, why) for p, why in sorted(listing.unread.items())]
    raw = listing.small.get(layout.CHECKSUMS)
    if raw is None:
        return [*findings, Finding(layout.CHECKSUMS, "missing")], {}
    try:
        entries = checksums.parse_checksums(raw, source=layout.CHECKSUMS)
    except BadInputError as exc:
        return [*findings, Finding(layout.CHECKSUMS, str(exc).removeprefix(f"{layout.CHECKSUMS}: "))], {}
    for path in sorted(listing.facts):
        facts = listing.facts[path]
        findings += _file_findings(path, facts)
        if layout.is_attestation(path):
            if path not in layout.ATTESTATION_FILES:
                findings.append(Finding(path, f"unexpected file in {layout.ATTESTATION_DIR}/"))
            continue
        if not layout.is_covered(path) or path in listing.unread:
            continue
        expected = entries.get(path)
        if expected is None:
            findings.append(Finding(path, f"not listed in {layout.CHECKSUMS} (added after the bundle was made)"))
        elif facts.sha256 != expected:
            findings.append(Finding(path, f"content does not match {layout.CHECKSUMS}"))
        elif facts.script != bool(facts.mode & stat.S_IXUSR):
            kind = "a script that is not executable" if facts.script else "executable, and not a script"
            findings.append(
                Finding(path, f"mode {facts.mode:04o}: {kind} (dsx bundle writes scripts 0755, the rest 0644)")
            )
    for path in sorted(entries):
        if path not in listing.facts:
            findings.append(Finding(path, f"listed in {layout.CHECKSUMS} but missing"))
        elif not layout.is_covered(path):
            findings.append(Finding(path, f"must not be listed in {layout.CHECKSUMS}"))
    findings += _manifest_findings(listing, entries)
    return findings, entries


def _file_findings(path: str, facts: FileFacts) -> list[Finding]:
    """What is wrong with a file whatever its bytes: more names than one, or setuid, setgid or sticky.
    (Group-writable is not: a checkout under umask 002 gives it, and the checksums still hold.)"""
    found = []
    if facts.links > 1:
        found.append(Finding(path, f"a hard link ({facts.links} names): its bytes may change from outside the bundle"))
    special = [
        name for bit, name in ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"), (stat.S_ISVTX, "sticky"))
        if facts.mode & bit
    ]  # fmt: skip
    if special:
        found.append(
            Finding(path, f"mode {facts.mode:04o}: {' and '.join(special)}; a bundle's files are 0644 or 0755")
        )
    return found


def _manifest_findings(listing: BundleListing, entries: Mapping[str, str]) -> list[Finding]:
    manifest = read_manifest(listing)
    if manifest is None:
        return [Finding(layout.MANIFEST, "missing or not a JSON object")]
    listed = manifest.get("files")
    expected = sorted(p for p in entries if p != layout.MANIFEST)
    if listed != expected:
        return [Finding(layout.MANIFEST, f"file list does not match {layout.CHECKSUMS}")]
    return []


def read_manifest(bundle: FileTree | BundleListing) -> dict[str, Any] | None:
    raw = (bundle.small if isinstance(bundle, BundleListing) else bundle.files).get(layout.MANIFEST)
    if raw is None:
        return None
    try:
        data = serialization.parse_json(raw, source=layout.MANIFEST)
    except BadInputError:
        return None
    return data if isinstance(data, dict) else None


def read_envelopes(data: bytes, *, source: str) -> list[dsse.Envelope]:
    """Envelopes in an `.intoto.jsonl` (one per line) or a Sigstore bundle `.json` file."""
    try:
        text = data.decode("utf-8")
        if source.endswith(SIGSTORE_SUFFIX) or source.endswith(".json"):
            return [sigstore.envelope_of(serialization.parse_json(text, source=source), source=source)]
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise BadInputError(f"{source}: empty attestation")
        return [
            dsse.Envelope.from_dict(
                serialization.parse_json(line, source=f"{source}: line {n}"), source=f"{source}: line {n}"
            )
            for n, line in enumerate(lines, 1)
        ]
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{source}: not JSON") from exc


def _check_subjects(statement: Statement, files: Mapping[str, bytes], required: Sequence[str]) -> list[Finding]:
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return _check_subject_digests(statement, digests, required)


def _check_subject_digests(
    statement: Statement, digests: Mapping[str, str | None], required: Sequence[str]
) -> list[Finding]:
    findings = []
    names = {s.name for s in statement.subjects}
    for name in required:
        if name not in names:
            findings.append(Finding(name, "not a subject of the signed statement"))
    for subject in statement.subjects:
        if subject.name not in digests:
            findings.append(Finding(subject.name, "signed subject is missing"))
            continue
        expected = subject.digest.get("sha256")
        if expected is None:
            findings.append(Finding(subject.name, "signed subject has no sha256 digest"))
        elif digests[subject.name] != expected:
            findings.append(Finding(subject.name, "does not match the digest in the signed statement"))
    return findings


def _verify_attestation_bytes(
    data: bytes, source: str, trusted: Sequence[Verifier]
) -> tuple[list[VerifiedStatement], list[Finding]]:
    try:
        envelopes = read_envelopes(data, source=source)
    except BadInputError as exc:
        return [], [Finding(source, str(exc).removeprefix(f"{source}: "))]
    verified: list[VerifiedStatement] = []
    findings: list[Finding] = []
    for envelope in envelopes:
        try:
            verified.append(verify_envelope(envelope, trusted, source=source))
        except TamperedError as exc:
            findings += exc.findings
    return verified, findings


def _signer_ids(data: bytes, source: str) -> list[str]:
    try:
        return sorted({s.key_id for e in read_envelopes(data, source=source) for s in e.signatures})
    except BadInputError:
        return []


def verify_bundle_tree(
    bundle: FileTree | BundleListing,
    trusted: Sequence[Verifier],
    *,
    target: str,
    irregular: Sequence[str] = (),
    freshness: FreshnessRule | None = None,
) -> Verdict:
    listing = bundle if isinstance(bundle, BundleListing) else BundleListing.of_tree(bundle, irregular)
    findings, entries = integrity_findings(listing)
    present = [p for p in layout.ATTESTATION_FILES if p in listing.small]
    checked = len(entries)
    if not present:
        level = TrustLevel.TAMPERED if findings else TrustLevel.UNSIGNED
        return Verdict(target, ArtifactKind.BUNDLE, level, tuple(findings), files_checked=checked)
    if not trusted:
        keys = sorted({k for p in present for k in _signer_ids(listing.small[p], p)})
        note = f"signature by key(s) {', '.join(keys) or '?'} not checked: no trusted key given (--key, --trusted-keys)"
        level = TrustLevel.TAMPERED if findings else TrustLevel.UNSIGNED
        return Verdict(target, ArtifactKind.BUNDLE, level, tuple(findings), files_checked=checked, notes=(note,))
    signed_by: set[str] = set()
    payloads: set[bytes] = set()
    manifest = read_manifest(listing) or {}
    digests = {path: facts.sha256 for path, facts in listing.facts.items()}
    stale: list[Finding] = []
    revisions: list[int | None] = []
    for path in present:
        statements, problems = _verify_attestation_bytes(listing.small[path], path, trusted)
        findings += problems
        for verified in statements:
            signed_by.update(verified.key_ids)
            payloads.add(verified.statement.to_payload())
            findings += _check_subject_digests(verified.statement, digests, [layout.CHECKSUMS, layout.MANIFEST])
            findings += _predicate_findings(verified.statement, manifest, path)
            stale += freshness.findings(verified.statement, path) if freshness else []
            revisions.append(provenance.freshness_of(verified.statement.predicate).revision)
    if len(payloads) > 1:
        findings.append(Finding(layout.SIGSTORE, f"signs a different statement than {layout.INTOTO}"))
    level = _level(findings, stale)
    notes = missing_sidecar_notes({p: listing.small[p] for p in present}, layout.INTOTO, layout.SIGSTORE)
    return Verdict(
        target,
        ArtifactKind.BUNDLE,
        level,
        tuple(_unique([*findings, *stale])),
        tuple(sorted(signed_by)),
        files_checked=checked,
        notes=tuple(notes),
        revision=_lowest(revisions),
    )


def missing_sidecar_notes(found: Mapping[str, bytes], intoto: str, sigstore_name: str) -> list[str]:
    """Which of the two signature files `dsx sign` writes is gone, when the other still verifies.

    `dsx sign` always writes the in-toto file and, for a single signature, the Sigstore bundle
    beside it. Either alone verifies, so a removed one changes no verdict, but it is said: a
    signature that was there and is not is worth a look."""
    if not found:
        return []
    if intoto not in found:
        return [f"{intoto}: missing (dsx sign writes it with {sigstore_name}); verified with {sigstore_name} alone"]
    if sigstore_name in found:
        return []
    try:
        envelopes = read_envelopes(found[intoto], source=intoto)
    except BadInputError:
        return []
    if len(envelopes) == 1 and len(envelopes[0].signatures) == 1:
        return [f"{sigstore_name}: missing (dsx sign writes it for one signature); verified with {intoto} alone"]
    return [f"signatures found: {intoto}"]


def _predicate_findings(statement: Statement, manifest: Mapping[str, Any], source: str) -> list[Finding]:
    if statement.predicate_type != provenance.SLSA_PROVENANCE_V1:
        return [Finding(source, f"predicate type {statement.predicate_type!r} is not SLSA provenance v1")]
    external = statement.predicate.get("buildDefinition", {}).get("externalParameters", {})
    recipe = manifest.get("recipe", {})
    if isinstance(recipe, dict) and external.get("recipeDigest") != recipe.get("digest"):
        return [Finding(layout.MANIFEST, "recipe digest differs from the signed provenance")]
    return []


def _lowest(revisions: Sequence[int | None]) -> int | None:
    """The revision a verdict vouches for: the lowest any verified statement carries (none if one has none)."""
    if not revisions or any(r is None for r in revisions):
        return None
    return min(r for r in revisions if r is not None)


def _unique(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))


def _no_key_note(data: bytes, source: str) -> str:
    keys = ", ".join(_signer_ids(data, source)) or "?"
    return f"signature by key(s) {keys} not checked: no trusted key given (--key, --trusted-keys)"


def _check_beside(
    data: bytes, source: str, read: ReadBeside, trusted: Sequence[Verifier]
) -> tuple[list[VerifiedStatement], list[Finding], int]:
    """Verify an attestation whose subjects are files beside it; returns statements, findings, files read."""
    statements, findings = _verify_attestation_bytes(data, source, trusted)
    read_count = 0
    for verified in statements:
        files: dict[str, bytes] = {}
        unsafe: set[str] = set()
        for subject in verified.statement.subjects:
            try:
                checksums.check_path(subject.name, source=source)
            except BadInputError:
                unsafe.add(subject.name)
                findings.append(Finding(subject.name, "unsafe subject path"))
                continue
            found = read(subject.name)
            if found is not None:  # else reported as missing below
                files[subject.name] = found
        read_count += len(files)
        findings += [f for f in _check_subjects(verified.statement, files, []) if f.subject not in unsafe]
    return statements, _unique(findings), read_count


def verify_attestation(data: bytes, name: str, target: str, read: ReadBeside, trusted: Sequence[Verifier]) -> Verdict:
    """A standalone `.intoto.jsonl` / `.sigstore.json` (`data`, file `name`): its subjects are files beside it."""
    if not trusted:
        note = _no_key_note(data, name)
        return Verdict(target, ArtifactKind.ATTESTATION, TrustLevel.UNSIGNED, notes=(note,))
    statements, findings, read_count = _check_beside(data, name, read, trusted)
    level = TrustLevel.TAMPERED if findings or not statements else TrustLevel.VERIFIED
    signed_by = tuple(sorted({k for v in statements for k in v.key_ids}))
    return Verdict(target, ArtifactKind.ATTESTATION, level, tuple(findings), signed_by, files_checked=read_count)


def sidecar_names(name: str) -> list[str]:
    """The names `dsx sign FILE` gives the attestations of FILE."""
    return [name + INTOTO_SUFFIX, name + SIGSTORE_SUFFIX]


def verify_signed(
    name: str,
    target: str,
    sidecars: Mapping[str, bytes],
    read: ReadBeside,
    trusted: Sequence[Verifier],
    freshness: FreshnessRule | None = None,
) -> Verdict:
    """A file (a recipe) signed by `dsx sign`: its attestations (`sidecars`, by name) sit beside it and must name it."""
    if not sidecars:
        note = f"no attestation beside it ({name}{INTOTO_SUFFIX})"
        return Verdict(target, ArtifactKind.FILE, TrustLevel.UNSIGNED, files_checked=1, notes=(note,))
    if not trusted:
        first, data = next(iter(sidecars.items()))
        note = _no_key_note(data, first)
        return Verdict(target, ArtifactKind.FILE, TrustLevel.UNSIGNED, files_checked=1, notes=(note,))
    findings: list[Finding] = []
    stale: list[Finding] = []
    revisions: list[int | None] = []
    signed_by: set[str] = set()
    for sidecar, data in sidecars.items():
        statements, problems, _ = _check_beside(data, sidecar, read, trusted)
        findings += problems
        for verified in statements:
            signed_by.update(verified.key_ids)
            if name not in {s.name for s in verified.statement.subjects}:
                findings.append(Finding(name, f"not a subject of {sidecar}"))
            stale += freshness.findings(verified.statement, sidecar) if freshness else []
            revisions.append(provenance.freshness_of(verified.statement.predicate).revision)
    level = _level(findings, stale, signed=bool(signed_by))
    findings += stale
    intoto, sigstore_name = sidecar_names(name)
    notes = missing_sidecar_notes(dict(sidecars), intoto, sigstore_name)
    return Verdict(
        target,
        ArtifactKind.FILE,
        level,
        tuple(_unique(findings)),
        tuple(sorted(signed_by)),
        1,
        notes=tuple(notes),
        revision=_lowest(revisions),
    )
