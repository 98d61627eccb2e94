"""Catalog data shipped inside the package (overlays, components, categories, rules).

This package holds data files only; `path()` finds them without importing any domain code.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def path(*parts: str) -> Path:
    return ROOT.joinpath(*parts)
