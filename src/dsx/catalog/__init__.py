"""Catalog data shipped inside the package (overlays, components, categories, rules).

This package holds data files only; `path()` finds them without importing any domain code.
`COMPILED` is the overlays and components compiled at build time (`dsx.recipes.compiled`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
