"""The catalog compiled to plain data, cached per catalog fingerprint, for `dsx recipe`'s start-up.

Loading the catalog (`dsx.recipes.catalog`) checks every file against its msgspec schema and
builds a model object per overlay, patch, constraint and assert: right for a catalog that may
have changed, and ~40 ms that `dsx recipe` would pay on every run. The checked catalog is
therefore also kept as plain data (`catalog.compile_catalog`) in a `dsx.marshal_cache` file
under the caller's cache folder (the entry point's `$DSX_CACHE_DIR/recipes/`), keyed by a hash
of every catalog file and of the code that compiles it, so an edited catalog (or a dsx that
compiles it differently) is loaded, checked and compiled again. A hit costs reading one file;
the recipe itself is still resolved on every run (`dsx.recipes.resolve`), never cached. A
caller without a cache folder (a library call, a test) compiles once per process. This module
imports nothing beyond the interpreter's own start-up set.
"""

from __future__ import annotations

import os

from dsx import marshal_cache

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
    """Hex hash of the root, of every file under its overlays and components, and of the code that
    compiles them (`dsx.recipes`, `dsx.model`, `dsx.serialization`); None if one is unreadable."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (os.path.join(package, "recipes"), os.path.join(package, "model"), os.path.join(package, "serialization.py"))
    return marshal_cache.tree_digest(root, _SOURCES, code=code)


def load(root: str | None = None, *, cache_dir: str | None = None) -> dict[str, Any]:
    """The compiled catalog under `root` (the shipped one by default): from this process, from the
    caller's `cache_dir` (the entry point's `dsx.settings.cache_root`), or compiled now and kept there."""
    root = os.path.abspath(root) if root is not None else default_root()
    if root in _loaded:
        return _loaded[root]
    key = fingerprint(root) if cache_dir else None
    folder = os.path.join(cache_dir, "recipes") if cache_dir else None
    if folder is not None and key is not None:
        data = marshal_cache.read(folder, "compiled", key, version=FORMAT)
        if isinstance(data, dict):
            _loaded[root] = data
            return data
    from pathlib import Path

    from dsx.recipes import catalog  # only on a miss: parses and checks every file

    data = catalog.load(Path(root), cache_dir=Path(cache_dir) if cache_dir else None).compiled
    if folder is not None and key is not None:
        marshal_cache.write(folder, "compiled", key, data, version=FORMAT)
    _loaded[root] = data
    return data
