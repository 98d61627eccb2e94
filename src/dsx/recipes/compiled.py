"""The catalog compiled to plain data, cached per catalog fingerprint, for `dsx recipe`'s start-up.

Loading the catalog (`dsx.recipes.catalog`) checks every file against its msgspec schema and
builds a model object per overlay, patch, constraint and assert: right for a catalog that may
have changed, and ~40 ms that `dsx recipe` would pay on every run. The checked catalog is
therefore also kept as plain data (`catalog.compile_catalog`), written with `marshal` under the
caller's cache folder (the entry point's `$DSX_CACHE_DIR/recipes/`) and keyed by a hash of every
catalog file's path and bytes, so an edited catalog is loaded, checked and compiled again. A hit
costs reading one file; the recipe itself is still resolved on every run (`dsx.recipes.resolve`),
never cached. A caller without a cache folder (a library call, a test) compiles once per process.

`marshal` rather than JSON: it loads several times faster and needs no import; the cache holds
only dicts, lists, text, numbers, booleans and None, and is trusted as `__pycache__` is (same
user, same folder rules). An unreadable, foreign or stale file is rebuilt; an unwritable cache
folder only costs speed. This module imports nothing beyond the interpreter's own start-up set.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
"""Bumped whenever the compiled shape changes, so an older cache file is rebuilt."""

NAMESPACE = "{namespace}"
"""Stands for the component's namespace in a compiled assert (no Kubernetes namespace has braces)."""

_SOURCES = ("overlays", "components")
_loaded: dict[str, dict[str, Any]] = {}


def default_root() -> str:
    """The shipped catalog folder (what `dsx.catalog.path()` is, without importing pathlib)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "catalog")


def fingerprint(root: str) -> str | None:
    """Hex hash of the root and of every file under its overlays and components; None if one is unreadable."""
    import hashlib

    digest = hashlib.sha256(root.encode())
    try:
        for path in sorted(p for folder in _SOURCES for p in _files(os.path.join(root, folder))):
            digest.update(f"\0{path[len(root) + 1 :]}\0".encode())  # the path within the catalog
            with open(path, "rb") as handle:
                digest.update(handle.read())
    except OSError:
        return None
    return digest.hexdigest()[:24]


def _files(folder: str) -> list[str]:
    found: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return found
    for entry in entries:
        if entry.is_dir():
            found.extend(_files(entry.path))
        elif entry.is_file():
            found.append(entry.path)
    return found


def load(root: str | None = None, *, cache_dir: str | None = None) -> dict[str, Any]:
    """The compiled catalog under `root` (the shipped one by default): from this process, from the
    caller's `cache_dir` (the entry point's `dsx.settings.cache_root`), or compiled now and kept there."""
    root = os.path.abspath(root) if root is not None else default_root()
    if root in _loaded:
        return _loaded[root]
    key = fingerprint(root) if cache_dir else None
    path = None
    if cache_dir and key is not None:
        tag = sys.implementation.cache_tag or "python"
        path = os.path.join(cache_dir, "recipes", f"compiled-{key}.{tag}.marshal")
        data = _read(path)
        if data is not None:
            _loaded[root] = data
            return data
    from pathlib import Path

    from dsx.recipes import catalog  # only on a miss: parses and checks every file

    data = catalog.load(Path(root), cache_dir=Path(cache_dir) if cache_dir else None).compiled
    if path is not None:
        _write(path, data)
    _loaded[root] = data
    return data


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as handle:
            data = marshal.loads(handle.read())  # noqa: S302 - our own cache file, trusted as __pycache__ is
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return data


def _write(path: str, data: dict[str, Any]) -> None:
    """Replace the cache file (`dsx.atomic`: a reader never sees half of one) and drop stale ones;
    an unwritable folder only costs the next run its speed. Only on a miss: the import is paid then."""
    from dsx import atomic

    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            if name.startswith("compiled-") and name.endswith(".marshal"):
                os.unlink(os.path.join(folder, name))
        atomic.write_file(path, marshal.dumps(data))
    except (OSError, ValueError):
        return
