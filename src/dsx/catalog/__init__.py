"""Catalog data shipped inside the package (overlays, components, categories, rules).

This package holds data files, and is the one reader of them: domains do no I/O
(tests/test_architecture.py scans them), so a domain's shipped defaults come from `text`,
`mapping`, `names` and `tree` here, which read only files that cannot change within a release
(or a copy of the catalog laid out the same way, for `tree`). A file a user names is read by
`dsx.files`. `COMPILED` is the overlays and components compiled at build time
(`dsx.recipes.compiled`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dsx import serialization
from dsx.errors import CatalogError

ROOT = Path(__file__).resolve().parent

COMPILED = ROOT / "compiled.json"
"""Written by the build (hatch_build.py), not kept in git."""


def path(*parts: str) -> Path:
    return ROOT.joinpath(*parts)


def compiled() -> dict[str, Any] | None:
    """The compiled catalog the build wrote, or None where no build ran (a bare source tree)."""
    try:
        data = json.loads(COMPILED.read_bytes())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def text(*parts: str) -> str:
    """A shipped file's text; a missing or unreadable one is a broken installation."""
    where = path(*parts)
    try:
        return where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{where}: cannot read the shipped file: {exc}") from exc


def mapping(*parts: str) -> dict[str, Any]:
    """A shipped YAML file whose top level is a mapping, parsed by the one safe loader."""
    return serialization.parse_mapping(text(*parts), source=str(path(*parts)))


def names(*parts: str, suffix: str = ".yaml") -> list[str]:
    """The stems of the shipped files in a folder ending in `suffix`, sorted."""
    folder = path(*parts)
    return sorted(p.name.removesuffix(suffix) for p in folder.iterdir() if p.name.endswith(suffix) and p.is_file())


def tree(root: Path | None = None) -> dict[str, str]:
    """Every file of a recipe catalog (the shipped one by default) by its path under the root.

    `overlays/**/*.yaml`, `components/*.yaml` and the files in `components/<name>/`, which
    hold a component's manifests: the shape `dsx.recipes.catalog.build` reads.
    """
    base = Path(root) if root is not None else ROOT
    found: dict[str, str] = {}
    for folder, recursive in (("overlays", True), ("components", False)):
        for file in sorted(_yaml_files(base / folder, recursive)):
            found[file.relative_to(base).as_posix()] = _read(file)
    components = base / "components"
    if components.is_dir():
        for entry in sorted(components.iterdir()):
            if entry.is_dir():
                for file in sorted(entry.iterdir()):
                    if file.is_file():
                        found[file.relative_to(base).as_posix()] = _read(file)
    return found


def _read(file: Path) -> str:
    source = file.as_posix()
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CatalogError(f"{source}: not UTF-8 text") from exc
    except OSError as exc:
        raise CatalogError(f"{source}: cannot read: {exc.strerror}") from exc


def _yaml_files(folder: Path, recursive: bool) -> list[Path]:
    files: list[Path] = []
    if not folder.is_dir():
        return files
    for entry in os.scandir(folder):
        if entry.is_dir():
            if recursive:
                files.extend(_yaml_files(Path(entry.path), recursive))
        elif entry.name.endswith(".yaml") and entry.is_file():
            files.append(Path(entry.path))
    return files
