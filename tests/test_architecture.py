"""Area of concern: the tiers of docs/architecture.md hold — imports point down, and each
third-party client is confined to the one package that owns it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "dsx"

TIERS = {
    "foundation": 0,
    "domain": 1,
    "adapters": 2,
    "entry": 3,
}
PACKAGE_TIER = {
    "model": "foundation",
    "errors": "foundation",
    "extras": "foundation",
    "settings": "foundation",
    "serialization": "foundation",
    "atomic": "foundation",
    "ratelimit": "foundation",
    "retry": "foundation",
    "httpclient": "foundation",
    "catalog": "foundation",
    "__init__": "foundation",
    "cel": "foundation",
    "interrupts": "foundation",
    "logs": "foundation",
    "images": "foundation",
    "recipes": "domain",
    "bundles": "domain",
    "signing": "domain",
    "lint": "domain",
    "certify": "domain",
    "health": "domain",
    "validation": "domain",
    "kube": "adapters",
    "store": "adapters",
    "sim": "adapters",
    "cli": "entry",
    "api": "entry",
    "controllers": "entry",
    "demo": "entry",
    "__main__": "entry",
}
# third-party top-level module → the dsx packages allowed to import it
CONFINED = {
    "lightkube": {"kube"},
    "click": {"cli"},
    "fastapi": {"api"},
    "fastapi_offline": {"api"},
    "starlette": {"api"},
    "psycopg": {"store"},
    "sqlite3": {"store"},
    "pynvml": {"health"},
}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path: Path) -> None:
    package = _package_of(path)
    assert package in PACKAGE_TIER, f"{package} has no tier in docs/architecture.md"
    own = TIERS[PACKAGE_TIER[package]]
    for name in _imports(path):
        top = name.split(".")
        if top[0] == "dsx" and len(top) > 1:
            target = top[1]
            assert target in PACKAGE_TIER, f"{path}: imports unknown package dsx.{target}"
            assert TIERS[PACKAGE_TIER[target]] <= own or target == package, (
                f"{path}: {PACKAGE_TIER[package]} package dsx.{package} imports "
                f"{PACKAGE_TIER[target]} package dsx.{target}"
            )
        allowed = CONFINED.get(top[0])
        if allowed is not None:
            assert package in allowed, f"{path}: imports {top[0]}, confined to {sorted(allowed)}"
