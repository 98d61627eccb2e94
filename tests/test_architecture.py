"""Area of concern: the import rules of docs/architecture.md cover the whole package.

import-linter (`.importlinter`, run by `make test` as `lint-imports`) checks the tiers, the
independence of the domain packages and where each third-party client may be imported. It only
checks the modules a contract names, and it cannot see dynamic imports; these tests close both gaps.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "dsx"
CONTRACTS = REPO / ".importlinter"
ALLOW_LIST = REPO / "hack" / "dynamic-imports.txt"
DYNAMIC = {"importlib.import_module", "import_module", "__import__", "importlib.util.find_spec", "find_spec"}
DYNAMIC |= {"pkgutil.iter_modules", "pkgutil.walk_packages", "runpy.run_module"}


def _contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONTRACTS, encoding="utf-8")
    return parser


def _names(value: str) -> set[str]:
    out: set[str] = set()
    for line in value.splitlines():
        line = line.split("#")[0].strip()
        for part in line.replace("|", ":").split(":"):
            if part.strip():
                out.add(part.strip())
    return out


def _top_level() -> set[str]:
    found = {f"dsx.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    found |= {f"dsx.{p.name}" for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    return found


def test_every_package_has_a_tier() -> None:
    tiers = _names(_contracts()["importlinter:contract:tiers"]["layers"])
    assert _top_level() - tiers == set(), "add the package to a tier in .importlinter and docs/architecture.md"
    assert tiers - _top_level() == set(), "a tier names a package that no longer exists"


@pytest.mark.parametrize(
    "contract", [s for s in _contracts().sections() if _contracts()[s].get("type") == "forbidden" and "confine-" in s]
)
def test_client_contracts_cover_every_other_package(contract: str) -> None:
    """A package added later is a source of every confinement contract unless it owns the client."""
    section = _contracts()[contract]
    sources = _names(section["source_modules"])
    assert sources <= _top_level()
    assert len(_top_level() - sources) <= 2, f"{contract}: only the owning packages may be left out"


def _dynamic_calls() -> set[tuple[str, str]]:
    calls: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(("dsx", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name in DYNAMIC:
                    calls.add((module, "importlib." + name if name in ("import_module",) else name))
    return calls


def _allowed() -> dict[tuple[str, str], str]:
    allowed: dict[tuple[str, str], str] = {}
    for line in ALLOW_LIST.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            module, call, reason = line.split(maxsplit=2)
            allowed[(module, call)] = reason
    return allowed


def test_dynamic_imports_are_listed_with_a_reason() -> None:
    calls, allowed = _dynamic_calls(), _allowed()
    assert calls, "the scan finds the known dynamic imports (dsx.cli.main); an empty scan is a broken scan"
    assert calls - set(allowed) == set(), f"list these in {ALLOW_LIST.name} with the reason they keep to the tiers"
    assert set(allowed) - calls == set(), f"{ALLOW_LIST.name} lists calls that are gone"
    assert all(len(reason) > 20 for reason in allowed.values())
