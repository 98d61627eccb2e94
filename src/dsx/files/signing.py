"""The files of `dsx keygen`, `dsx sign`, `dsx verify` and `dsx validate --attest`.

Why apart from `dsx.signing`: the domain signs and verifies bytes (PEM keys, file trees,
attestation documents) and does no I/O; this module reads and writes the files a command
names and hands their names in, so every error still names the file. Private keys are created
with mode 0600 before a byte is written and never overwrite an existing key.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsx import atomic, serialization
from dsx.errors import BadInputError, CheckFailedError, NotFoundError
from dsx.file_tree import FileTree, list_tree, read_tree
from dsx.files import documents
from dsx.model import bundle_layout as layout
from dsx.model import checksums
from dsx.signing import attest, keys, provenance, sigstore, verify
from dsx.signing.keys import PASSPHRASE_ENV, KeySigner, TrustedKey
from dsx.signing.signer import Algorithm, Signer, Verifier
from dsx.signing.statement import Subject, sign_statement
from dsx.signing.verdict import Verdict

# -- keys ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyPairPaths:
    private: Path
    public: Path


def write_key_pair(prefix: Path, algorithm: Algorithm, passphrase: bytes | None = None) -> KeyPairPaths:
    """Write PREFIX.key (0600) and PREFIX.pub; never overwrite an existing key."""
    paths = KeyPairPaths(prefix.with_name(prefix.name + keys.PRIVATE_SUFFIX), prefix.with_name(prefix.name + ".pub"))
    for path in (paths.private, paths.public):
        if path.exists():
            raise BadInputError(f"{path}: already exists; refusing to overwrite a key")
    private_pem, public_pem = keys.new_key_pair(algorithm, passphrase)
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(paths.private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(private_pem)
        os.chmod(paths.private, 0o600)  # the umask may have narrowed it further; never wider
        atomic.write_file(paths.public, public_pem)
    except OSError as exc:
        raise BadInputError(f"{prefix}: cannot write key pair: {exc.strerror}") from exc
    return paths


def _read_key_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path}: key file not found") from exc
    except IsADirectoryError as exc:
        raise BadInputError(f"{path}: is a directory, expected a key file") from exc
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read key: {exc.strerror}") from exc


def load_signer(path: Path, passphrase: bytes | None = None, *, passphrase_env: str = PASSPHRASE_ENV) -> KeySigner:
    """Load a private key file; the message names the file and the variable the passphrase comes from."""
    return keys.signer_from_pem(_read_key_bytes(path), str(path), passphrase, passphrase_env=passphrase_env)


def load_public_key(path: Path) -> TrustedKey:
    return keys.trusted_key_from_pem(_read_key_bytes(path), str(path))


def load_trusted_keys(directory: Path) -> list[TrustedKey]:
    """Every *.pub / *.pem file in `directory`, in name order."""
    if not directory.is_dir():
        if directory.exists():
            raise BadInputError(f"{directory}: not a directory of trusted keys")
        raise NotFoundError(f"{directory}: trusted-keys directory not found")
    files = sorted(p for p in directory.iterdir() if p.suffix in keys.PUBLIC_SUFFIXES and p.is_file())
    if not files:
        raise BadInputError(f"{directory}: no public keys (*.pub, *.pem) in the trusted-keys directory")
    return [load_public_key(p) for p in files]


# -- signing ---------------------------------------------------------------------------------------


def sign_bundle_directory(
    directory: Path, signer: Signer | Sequence[Signer], freshness: provenance.Freshness | None = None
) -> list[Path]:
    """Write attestation/ into an existing bundle directory; returns the files written."""
    contents = read_tree(directory)
    if contents.irregular:
        raise CheckFailedError(f"{directory}: refusing to sign: {contents.irregular[0]} is not a regular file")
    kept = {p: b for p, b in contents.tree.files.items() if not layout.is_attestation(p)}
    envelope = attest.bundle_envelope(FileTree(kept, contents.tree.executables), signer, freshness)
    files = attest.attestation_files(envelope)
    written = [_write(directory / rel, data) for rel, data in files.items()]
    for stale in set(layout.ATTESTATION_FILES) - set(files):
        (directory / stale).unlink(missing_ok=True)
    return written


def sign_file(
    path: Path,
    signer: Signer | Sequence[Signer],
    *,
    created_at: str | None = None,
    freshness: provenance.Freshness | None = None,
) -> list[Path]:
    """Sign a recipe file; the attestations go beside it as FILE.intoto.jsonl and FILE.sigstore.json."""
    document = documents.load_mapping_file(path)
    attest.check_recipe(document, source=str(path))
    sidecars = attest.recipe_sidecars(
        path.name, path.read_bytes(), document, signer, created_at=created_at, freshness=freshness
    )
    return [_write(path.with_name(name), data) for name, data in sidecars.items()]


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
    intoto_path, sigstore_path = sidecar_paths(primary)
    return {
        intoto_path: envelope.to_json_line().decode("utf-8"),
        sigstore_path: sigstore.dump_bundle(envelope).decode("utf-8"),
    }


# -- verifying -------------------------------------------------------------------------------------


def sidecar_paths(path: Path) -> list[Path]:
    """Where `dsx sign FILE` writes the attestations of FILE."""
    return [path.with_name(name) for name in verify.sidecar_names(path.name)]


def verify_path(path: Path, trusted: Sequence[Verifier], freshness: verify.FreshnessRule | None = None) -> Verdict:
    """Dispatch on what `path` is: a bundle directory, an attestation, or a signed file."""
    if not path.exists():
        raise BadInputError(f"{path}: not found")
    if path.is_dir():
        listing = scan_bundle(path)
        if (
            layout.CHECKSUMS not in listing.facts
            and layout.MANIFEST not in listing.facts
            and not any(p in listing.facts for p in layout.ATTESTATION_FILES)
        ):
            raise BadInputError(f"{path}: not a dsx bundle (no {layout.CHECKSUMS} or {layout.MANIFEST})")
        return verify.verify_bundle_tree(listing, trusted, target=str(path), freshness=freshness)
    if path.name.endswith((verify.INTOTO_SUFFIX, verify.SIGSTORE_SUFFIX)):
        return verify.verify_attestation(_read_bytes(path), path.name, str(path), _beside(path), trusted)
    _read_bytes(path)
    sidecars = {p.name: _read_bytes(p) for p in sidecar_paths(path) if p.is_file()}
    return verify.verify_signed(path.name, str(path), sidecars, _beside(path), trusted, freshness)


STATE_SCHEMA = "dsx.run/verified/v1"


def read_verified_revision(state: Path) -> int | None:
    """The revision last verified into `state` (`dsx verify --state`); None when the file is new."""
    if not state.exists():
        return None
    document = documents.load_mapping_file(state)
    revision = document.get("revision")
    if document.get("schema") != STATE_SCHEMA or not isinstance(revision, int) or isinstance(revision, bool):
        raise BadInputError(f"{state}: not a dsx verify state file (schema {STATE_SCHEMA}, an integer revision)")
    return revision


def record_verified_revision(state: Path, target: str, revision: int) -> None:
    """Keep the highest revision verified so far: a later older bundle then fails against it."""
    known = read_verified_revision(state)
    if known is not None and known >= revision:
        return
    document = {"schema": STATE_SCHEMA, "target": target, "revision": revision}
    _write(state, serialization.dump_json(document).encode())


_CHUNK_BYTES = 1 << 20


def scan_bundle(directory: Path) -> verify.BundleListing:
    """A bundle directory as `verify` needs it, in bounded memory and time.

    The listing comes from the directory alone (names, sizes, modes, link counts); only the files
    checksums.txt lists are read, each hashed in a stream, and checksums.txt, bundle.json and the
    attestation files are read whole up to `verify.MAX_SMALL_FILE_BYTES`. So a 4 GiB file nobody
    listed is reported without a byte of it read. A file is opened without following a link, and a
    hashed file's size, mode and links come from the open file, not from the listing before it."""
    if not directory.is_dir():
        raise BadInputError(f"{directory}: not a directory")
    regular, irregular = list_tree(directory)
    small: dict[str, bytes] = {}
    unread: dict[str, str] = {}
    for rel in verify.small_files_wanted(sorted(regular)):
        if regular[rel].st_size > verify.MAX_SMALL_FILE_BYTES:
            unread[rel] = f"{regular[rel].st_size} bytes: larger than {verify.MAX_SMALL_FILE_BYTES} (not read)"
            continue
        try:
            small[rel] = _read_bounded(directory / rel, verify.MAX_SMALL_FILE_BYTES)
        except OSError as exc:
            unread[rel] = f"cannot read: {exc.strerror}"
    try:
        listed = set(checksums.parse_checksums(small[layout.CHECKSUMS], source=layout.CHECKSUMS))
    except (KeyError, BadInputError):
        listed = set()
    facts: dict[str, verify.FileFacts] = {}
    for rel, info in sorted(regular.items()):
        if rel in unread:
            facts[rel] = verify.FileFacts(info.st_size, None, stat.S_IMODE(info.st_mode), info.st_nlink)
        elif rel in small:
            data = small[rel]
            facts[rel] = verify.FileFacts(
                len(data), checksums.sha256_hex(data), stat.S_IMODE(info.st_mode), info.st_nlink, data.startswith(b"#!")
            )
        elif rel not in listed:
            facts[rel] = verify.FileFacts(info.st_size, None, stat.S_IMODE(info.st_mode), info.st_nlink)
        elif info.st_size > verify.MAX_LISTED_FILE_BYTES:
            unread[rel] = f"{info.st_size} bytes: larger than a bundle's file can be ({verify.MAX_LISTED_FILE_BYTES})"
            facts[rel] = verify.FileFacts(info.st_size, None, stat.S_IMODE(info.st_mode), info.st_nlink)
        else:
            try:
                facts[rel] = _hashed(directory / rel)
            except OSError as exc:
                unread[rel] = f"cannot read: {exc.strerror}"
                facts[rel] = verify.FileFacts(info.st_size, None, stat.S_IMODE(info.st_mode), info.st_nlink)
    return verify.BundleListing(facts, small, tuple(sorted(irregular)), unread)


def _open_regular(path: Path) -> int:
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(0, "not a regular file", str(path))
    return descriptor


def _read_bounded(path: Path, limit: int) -> bytes:
    descriptor = _open_regular(path)
    with os.fdopen(descriptor, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(0, f"larger than {limit} bytes", str(path))
    return data


def _hashed(path: Path) -> verify.FileFacts:
    descriptor = _open_regular(path)
    digest = hashlib.sha256()
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(stream.fileno())
        head = b""
        read = 0
        while read <= verify.MAX_LISTED_FILE_BYTES:
            chunk = stream.read(_CHUNK_BYTES)
            if not chunk:
                break
            if not read:
                head = chunk[:2]
            digest.update(chunk)
            read += len(chunk)
    return verify.FileFacts(read, digest.hexdigest(), stat.S_IMODE(info.st_mode), info.st_nlink, head == b"#!")


def _beside(path: Path) -> verify.ReadBeside:
    """Reads a subject named in an attestation from the folder of `path`; None when it cannot."""
    folder = path.parent

    def read(name: str) -> bytes | None:
        try:
            return (folder / name).read_bytes()
        except OSError:
            return None  # reported as missing

    return read


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise BadInputError(f"{path}: not found") from exc
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read: {exc.strerror}") from exc
