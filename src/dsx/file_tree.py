"""A bundle in memory (relative path → bytes) and its one-way trips to and from a directory.

Rendering and signing work on this in-memory tree, so they are pure and testable without a
disk; only `write_tree` and `read_tree` touch the filesystem. Writing goes to a staging
directory first and swaps it into place, so a crash never leaves a half-written bundle that
looks complete.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dsx import atomic, serialization
from dsx.errors import BadInputError, NotFoundError
from dsx.model import bundle_layout as layout
from dsx.model import checksums


@dataclass(frozen=True)
class FileTree:
    files: Mapping[str, bytes]
    executables: frozenset[str] = field(default_factory=frozenset)

    def with_files(self, extra: Mapping[str, bytes]) -> FileTree:
        return FileTree({**self.files, **extra}, self.executables)

    def paths(self) -> list[str]:
        return sorted(self.files)


@dataclass(frozen=True)
class DirectoryContents:
    """What `read_tree` found: regular files, and anything else (links, devices) by path."""

    tree: FileTree
    irregular: tuple[str, ...]


def list_tree(directory: Path) -> tuple[dict[str, os.stat_result], list[str]]:
    """Every regular file under `directory` with its `lstat`, and the paths of everything else
    (links, devices; a linked folder is not entered), without reading a byte of any file."""
    regular: dict[str, os.stat_result] = {}
    irregular: list[str] = []
    try:
        for root, dirnames, filenames in os.walk(directory, followlinks=False):
            base = Path(root)
            for name in list(dirnames):
                if (base / name).is_symlink():
                    irregular.append((base / name).relative_to(directory).as_posix())
                    dirnames.remove(name)
            for name in filenames:
                info = (base / name).lstat()
                rel = (base / name).relative_to(directory).as_posix()
                if stat.S_ISREG(info.st_mode):
                    regular[rel] = info
                else:
                    irregular.append(rel)
    except OSError as exc:
        raise BadInputError(f"{directory}: cannot read: {exc.strerror} ({exc.filename})") from exc
    return regular, irregular


def read_tree(directory: Path) -> DirectoryContents:
    """Every regular file under `directory`, keyed by forward-slash relative path."""
    if not directory.exists():
        raise NotFoundError(f"{directory}: not found")
    if not directory.is_dir():
        raise BadInputError(f"{directory}: not a directory")
    regular, irregular = list_tree(directory)
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    try:
        for rel, info in regular.items():
            files[rel] = (directory / rel).read_bytes()
            if info.st_mode & stat.S_IXUSR:
                executables.add(rel)
    except OSError as exc:
        raise BadInputError(f"{directory}: cannot read: {exc.strerror} ({exc.filename})") from exc
    return DirectoryContents(FileTree(files, frozenset(executables)), tuple(sorted(irregular)))


def write_tree(tree: FileTree, directory: Path) -> None:
    """Replace `directory` with exactly `tree`.

    Only an empty directory or an earlier bundle is replaced, and only when everything in it
    belongs to that bundle: a file it does not list (a `.git` folder, notes) would be lost, so
    the write is refused naming it, and nothing changes.
    """
    if directory.exists():
        if not directory.is_dir():
            raise BadInputError(f"{directory}: exists and is not a directory")
        if any(directory.iterdir()):
            _check_replaceable(directory)
    try:
        atomic.write_folder(directory.resolve(), tree.files, executables=tree.executables)
    except OSError as exc:
        raise BadInputError(f"{directory}: cannot write bundle: {exc.strerror} ({exc.filename})") from exc


def _check_replaceable(directory: Path) -> None:
    if not (directory / layout.MANIFEST).is_file():
        raise BadInputError(f"{directory}: not empty and not a dsx bundle; choose an empty or new directory")
    trusted, changed = _verified_files(directory)
    known = {*trusted, layout.MANIFEST, layout.CHECKSUMS, *layout.ATTESTATION_FILES}
    known_dirs = {"/".join(path.split("/")[:depth]) for path in known for depth in range(1, path.count("/") + 1)}
    entries = [p for p in _entries(directory) if p not in known]
    problems = [f"{p}, changed since the bundle was written" for p in entries if p in changed]
    foreign = list(dict.fromkeys(_outermost(p, known_dirs) for p in entries if p not in changed))
    if foreign:
        problems.append(", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""))
        problems[-1] += ", not part of the bundle there"
    if problems:
        raise BadInputError(
            f"{directory}: holds {'; '.join(problems)}; replacing it would lose them "
            "(move them, or choose an empty or new directory)"
        )


def _verified_files(directory: Path) -> tuple[set[str], set[str]]:
    """The earlier bundle's files that may be replaced, and those listed but edited since.

    `bundle.json` and `checksums.txt` are plain files anyone can write, so their lists are
    claims: a file counts only at a path a bundle can hold (no hidden or `..` segment, so a
    forged list cannot claim `.git/config`), as a regular file listed by both, with the bytes
    its checksum names. Everything else is kept, and the write refused.
    """
    source = f"{directory / layout.MANIFEST}"
    try:
        manifest = serialization.parse_json((directory / layout.MANIFEST).read_bytes(), source=source)
        listed = manifest.get("files") if isinstance(manifest, dict) else None
        sums = checksums.parse_checksums((directory / layout.CHECKSUMS).read_bytes(), source=layout.CHECKSUMS)
    except (OSError, BadInputError):
        listed = None
    if not isinstance(listed, list):
        raise BadInputError(
            f"{directory}: {layout.MANIFEST} and {layout.CHECKSUMS} do not list the bundle's files; "
            "choose an empty or new directory"
        )
    trusted: set[str] = set()
    changed: set[str] = set()
    for path in (p for p in listed if isinstance(p, str) and p in sums and _holdable(p)):
        try:
            if not stat.S_ISREG((directory / path).lstat().st_mode):
                continue
            digest = checksums.sha256_hex((directory / path).read_bytes())
        except OSError:
            continue
        (trusted if digest == sums[path] else changed).add(path)
    return trusted, changed


def _holdable(path: str) -> bool:
    """A path some bundle could hold: relative, no `..` and no hidden segment."""
    try:
        checksums.check_path(path, source="bundle")
    except BadInputError:
        return False
    return not any(part.startswith(".") for part in path.split("/"))


def _outermost(path: str, known_dirs: set[str]) -> str:
    """`path`, or its outermost folder that holds nothing of the bundle (`.git/` for `.git/HEAD`)."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth])
        if folder not in known_dirs:
            return folder + "/"
    return path


def _entries(directory: Path) -> list[str]:
    """Relative paths of the files (and links) under `directory`, without reading them."""
    found: list[str] = []
    for root, dirnames, filenames in os.walk(directory, followlinks=False):
        base = Path(root)
        links = [name for name in dirnames if (base / name).is_symlink()]
        for name in [*links, *filenames]:
            found.append((base / name).relative_to(directory).as_posix())
        dirnames[:] = [name for name in dirnames if name not in links]
    return sorted(found)
