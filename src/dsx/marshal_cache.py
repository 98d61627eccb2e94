"""Checked data kept between runs as `marshal` files keyed by the hash of their sources.

Its one user is the parsed chart data lint reads (`dsx.charts.directory`): charts in the user's
chart cache change whenever a chart is fetched, so, unlike the recipe catalog (compiled once at
build time, `dsx.recipes.compiled`), what they parse into is kept per content. It is rebuilt
from files that are read and checked on a miss (YAML, schemas), and is a few milliseconds to
load on a hit. A cache file's
name holds its stem (what it caches), a key (a hash of every source file's path and bytes, so
an edited source is a miss) and the interpreter's cache tag; its content holds a version, so a
changed shape is a miss too.

`marshal` rather than JSON: it loads several times faster and needs no import. The files are
trusted as `__pycache__` is (same user, same folder rules). An unreadable, foreign or stale file
is a miss; an unwritable folder or data marshal cannot hold (a YAML timestamp) only costs speed."""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Iterable
from typing import Any

_MARK = "dsx-marshal-cache"


def tree_digest(root: str, folders: Iterable[str] = ("",), *, code: Iterable[str] = ()) -> str | None:
    """Hex hash of `root` and of every file under its `folders` (path within root, length, bytes),
    and of the `.py` files in `code` (files or folders of the dsx code that turns those files into
    the kept data, so a dsx that reads them differently misses too). None when root is no folder
    or a file is unreadable."""
    import hashlib

    if not os.path.isdir(root):
        return None
    digest = hashlib.sha256(root.encode())
    try:
        for path in sorted(p for folder in folders for p in _files(os.path.join(root, folder))):
            _add(digest, path[len(root) :].lstrip(os.sep), path)  # the path within root
        for path in sorted(_code_files(code)):
            _add(digest, "code:" + os.path.basename(path), path)
    except OSError:
        return None
    return digest.hexdigest()[:24]


def _add(digest: Any, name: str, path: str) -> None:
    with open(path, "rb") as handle:
        data = handle.read()
    digest.update(f"\0{name}\0{len(data)}\0".encode())  # the length: no two trees hash alike by shifting bytes
    digest.update(data)


def _code_files(code: Iterable[str]) -> list[str]:
    found: list[str] = []
    for path in code:
        if os.path.isdir(path):
            found.extend(p for p in _files(path) if p.endswith(".py"))
        else:
            found.append(path)
    return found


def _files(folder: str) -> list[str]:
    found: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        if entry.is_dir():
            found.extend(_files(entry.path))
        elif entry.is_file():
            found.append(entry.path)
    return found


def _path(folder: str, stem: str, key: str) -> str:
    return os.path.join(folder, f"{stem}-{key}.{sys.implementation.cache_tag or 'python'}.marshal")


def read(folder: str, stem: str, key: str, *, version: int) -> Any:
    """The data kept for `stem` at `key` in shape `version`, or None when there is none to trust."""
    try:
        with open(_path(folder, stem, key), "rb") as handle:
            kept = marshal.loads(handle.read())  # noqa: S302 - our own cache file, trusted as __pycache__ is
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(kept, tuple) or len(kept) != 3 or kept[:2] != (_MARK, version):
        return None
    return kept[2]


_UNUSED_S = 30 * 86400
"""A cache file no run has rewritten for this long is removed by the next write in its folder
(a still-used one is only rebuilt once); a temporary file left by a killed writer goes after an hour."""


def write(folder: str, stem: str, key: str, data: Any, *, version: int) -> None:
    """Keep `data` for `stem` at `key` (`dsx.atomic`: a reader never sees half a file), drop the
    stem's files of other keys and the folder's long-unused files. Failing only costs the next run
    its speed, so it never raises."""
    import time

    from dsx import atomic  # only on a miss: the import is paid then

    path = _path(folder, stem, key)
    name = os.path.basename(path)
    try:
        payload = marshal.dumps((_MARK, version, data))
        os.makedirs(folder, exist_ok=True)
        atomic.write_file(path, payload)
        others = [entry for entry in os.scandir(folder) if entry.name != name]
    except (OSError, ValueError):
        return
    now = time.time()
    for entry in others:
        try:
            if entry.name.endswith(".marshal"):
                stale = entry.name.startswith(f"{stem}-") or now - entry.stat().st_mtime > _UNUSED_S
            else:
                stale = entry.name.endswith(".tmp") and now - entry.stat().st_mtime > 3600
            if stale:
                os.unlink(entry.path)
        except OSError:
            continue  # another process removed it, or it is not ours to remove
