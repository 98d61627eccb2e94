"""Area of concern: the import rules of docs/architecture.md cover the whole package.

import-linter (`.importlinter`, run by `make test` as `lint-imports`) checks the tiers, the
independence of the domain packages and where each third-party client may be imported. It only
checks the modules a contract names, and it cannot see dynamic imports; these tests close both gaps.
"""

from __future__ import annotations

import ast
import configparser
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "dsx"
CONTRACTS = REPO / ".importlinter"
ALLOW_LIST = REPO / "hack" / "dynamic-imports.txt"


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


def _modules() -> Iterator[tuple[str, ast.Module]]:
    """Every module of the package: its dotted name and its syntax tree."""
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(("dsx", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        yield module, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _resolver(tree: ast.Module) -> Callable[[ast.expr], str]:
    """The dotted name an expression refers to, through the module's import aliases
    (`import importlib as il` → `il.import_module` is `importlib.import_module`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".")[0]
                aliases[alias.asname or head] = alias.name if alias.asname else head
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def resolve(expr: ast.expr) -> str:
        head, _, rest = ast.unparse(expr).partition(".")
        real = aliases.get(head, head)
        return f"{real}.{rest}" if rest else real

    return resolve


DYNAMIC_QUALIFIED = {
    "importlib.import_module",
    "importlib.__import__",
    "__import__",
    "builtins.__import__",
    "importlib.util.find_spec",
    "pkgutil.iter_modules",
    "pkgutil.walk_packages",
    "runpy.run_module",
    "runpy.run_path",
}


def _dynamic_calls() -> set[tuple[str, str]]:
    calls: set[tuple[str, str]] = set()
    for module, tree in _modules():
        resolve = _resolver(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (name := resolve(node.func)) in DYNAMIC_QUALIFIED:
                calls.add((module, name))
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


ENTRY_POINTS = {"dsx.__main__", "dsx.cli", "dsx.api", "dsx.controllers", "dsx.demo"}
"""The tier that reads the process's environment and hands what it read down as arguments."""

ENVIRONMENT_READERS = {
    "dsx.settings.folders": "a library caller without an entry point is its own: paths() reads os.environ then",
    "dsx.executors.local.worker": "the worker process's own entry point (python -m dsx.executors.local.worker)",
    "dsx.executors.local.executor": "hands its environment on to the worker processes it starts",
    "dsx.sim.binaries": "hands its environment on to the control-plane build script it runs",
    "dsx.sim.processes": "starts components with the environment they inherit plus what one needs (a TMPDIR)",
}
"""Modules outside the entry points that read os.environ, each with its reason."""
ENVIRONMENT = {"os.environ", "os.environb", "os.getenv", "os.putenv", "os.unsetenv"}


def _environment_readers() -> set[str]:
    readers: set[str] = set()
    for module, tree in _modules():
        resolve = _resolver(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute) and resolve(node) in ENVIRONMENT:
                readers.add(module)
    return readers


def test_only_entry_points_read_the_environment() -> None:
    """Domain, foundation and adapters are handed folders and settings; they never read the environment."""
    readers = _environment_readers()
    assert "dsx.cli.main" in readers, "the scan finds the CLI's one reading; an empty scan is a broken scan"
    outside = {m for m in readers if not any(m == e or m.startswith(e + ".") for e in ENTRY_POINTS)}
    assert outside == set(ENVIRONMENT_READERS)


PROCESS_CALLS = {"os.system", "os.popen", "os.fork", "os.forkpty", "os.kill", "os.killpg", "pty.spawn"}
PROCESS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")
DOMAIN_AND_FOUNDATION = ("recipes", "bundles", "signing", "lint", "certify", "health", "validation", "model", "errors")
DOMAIN_AND_FOUNDATION += ("settings", "serialization", "emit", "atomic", "catalog", "cel", "logs", "images", "extras")
DOMAIN_AND_FOUNDATION += ("file_tree", "marshal_cache", "retry", "ratelimit")
"""The tiers below the adapters; `dsx.interrupts` sends itself signals in its tests only and is left out."""


def _process_calls() -> set[tuple[str, str]]:
    """(module, call) for every use of os's process functions, however os was imported."""
    found: set[tuple[str, str]] = set()
    for module, tree in _modules():
        resolve = _resolver(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute):
                name = resolve(node)
                if name in PROCESS_CALLS or name.startswith(PROCESS_PREFIXES):
                    found.add((module, name))
    return found


def test_the_domain_and_the_foundation_start_no_process_through_os() -> None:
    """import-linter forbids `subprocess` there; `os.system`, `os.popen`, `os.exec*` and `os.spawn*`
    are attributes of a module every tier may import, so this scan forbids them by name."""
    calls = _process_calls()
    assert ("dsx.executors.local.worker", "os.fork") in calls, "the scan finds the worker's fork (or is broken)"
    below = {(m, c) for m, c in calls if m.split(".")[1] in DOMAIN_AND_FOUNDATION}
    assert below == set(), f"start processes in an adapter (dsx.executors, dsx.host): {sorted(below)}"


DOMAIN_AND_MODEL = ("recipes", "bundles", "signing", "lint", "certify", "health", "validation", "model")
"""The packages that decide on data and never touch a file: an entry point or an adapter reads
what a user names (`dsx.files`), and `dsx.catalog` reads what the package ships."""
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "iterdir", "glob", "rglob"}
FILE_METHODS |= {"mkdir", "unlink", "rmdir", "touch", "exists", "is_file", "is_dir", "stat", "lstat", "chmod"}
FILE_METHODS |= {"symlink_to", "hardlink_to", "readlink", "scandir", "listdir"}
FILE_FUNCTIONS = {"open", "io.open", "builtins.open", "dsx.file_tree.read_tree", "dsx.file_tree.write_tree"}
FILE_FUNCTIONS |= {"dsx.file_tree.list_tree"}
FILE_MODULES = ("os.", "shutil.", "tempfile.", "glob.", "dsx.atomic.", "dsx.marshal_cache.", "dsx.files.")


def _file_calls() -> set[tuple[str, str]]:
    """(module, call) for every call that reads, writes or lists a file, however it was imported."""
    found: set[tuple[str, str]] = set()
    for module, tree in _modules():
        resolve = _resolver(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = resolve(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in FILE_FUNCTIONS or name.startswith(FILE_MODULES) or method in FILE_METHODS:
                found.add((module, name))
    return found


def test_the_domain_and_the_model_read_and_write_no_file() -> None:
    """ "Domain does no I/O", proved: no open(), no Path method that touches the disk, no os, shutil,
    tempfile or dsx.atomic call in the domain packages or dsx.model (import-linter's domain-io
    contract keeps their modules out too; this scan sees calls made through any alias)."""
    calls = _file_calls()
    assert ("dsx.files.documents", "open") in calls, "the scan finds the one user-file reader (or is broken)"
    assert any(m == "dsx.catalog" for m, _ in calls), "the scan finds the shipped-data reader (or is broken)"
    below = {(m, c) for m, c in calls if m.split(".")[1] in DOMAIN_AND_MODEL}
    assert below == set(), f"read files in dsx.files or dsx.catalog and hand the domain their text: {sorted(below)}"
