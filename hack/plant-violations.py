#!/usr/bin/env python3
"""Plant one violation of each architecture rule in a scratch copy and show that the checks fail.

Usage: .venv/bin/python hack/plant-violations.py [NAME ...]

For each case it copies the repository's tracked files to a temporary folder, appends one line to
one module, and runs what `make test` runs for the architecture: `lint-imports` and
tests/test_architecture.py. A case passes when at least one of them fails; the script exits 1 if
any planted violation went unnoticed, and with no plant at all both checks must pass.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv" / "bin"

CASES: dict[str, tuple[str, str]] = {
    # name: (module under src/dsx, line appended)
    "httpx in a domain": ("recipes/resolve.py", "import httpx"),
    "asyncio in a domain": ("health/decisions/drain.py", "import asyncio"),
    "multiprocessing in a domain": ("certify/engine.py", "import multiprocessing"),
    "threading in a domain": ("lint/chart.py", "import threading"),
    "zipfile in a domain": ("bundles/render.py", "import zipfile"),
    "os.system in a domain": ("validation/drift.py", "import os as _o\n_o.system('true')"),
    "subprocess in the foundation": ("model/recipe.py", "import subprocess"),
    "socket in the foundation": ("settings/__init__.py", "import socket"),
    "aliased import_module": ("recipes/selector.py", "import importlib as _il\n_il.import_module('json')"),
    "os.environ through an alias": ("health/decisions/policy.py", "from os import environ as _e\n_e.get('X')"),
    "open() in a domain": ("health/decisions/analyzer.py", "def _f():\n    return open('x').read()"),
    "Path.read_text in a domain": ("certify/parsing/profiles.py", "def _f(p):\n    return p.read_text()"),
    "Path.glob in the model": ("model/certify_catalog.py", "def _f(p):\n    return list(p.glob('*.yaml'))"),
    "a dsx.files reader in a domain": ("recipes/inputs.py", "from dsx.files import documents"),
    "dsx.atomic in a domain": ("bundles/helm.py", "from dsx import atomic"),
    "tempfile in a domain": ("signing/attest.py", "import tempfile"),
}


def _copy(target: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for name in files.decode().split("\0"):
        if name and (REPO / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target / name)


def _checks(root: Path) -> dict[str, bool]:
    """Whether each check passed on the tree at `root`."""
    env = {"PATH": f"{VENV}:/usr/bin:/bin", "PYTHONPATH": str(root / "src"), "HOME": str(root)}
    lint = subprocess.run([str(VENV / "lint-imports")], cwd=root, env=env, capture_output=True)
    scan = subprocess.run(
        [str(VENV / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_architecture.py"],
        cwd=root,
        env=env,
        capture_output=True,
    )
    return {"lint-imports": lint.returncode == 0, "test_architecture": scan.returncode == 0}


def main(argv: list[str]) -> int:
    wanted = argv or list(CASES)
    with tempfile.TemporaryDirectory(prefix="dsx-plant-") as scratch:
        root = Path(scratch)
        _copy(root)
        clean = _checks(root)
        print(f"{'no plant':40} " + "  ".join(f"{k}: {'pass' if v else 'FAIL'}" for k, v in clean.items()))
        if not all(clean.values()):
            print("the unplanted copy fails: fix that first")
            return 1
        missed = []
        for name in wanted:
            module, line = CASES[name]
            path = root / "src" / "dsx" / module
            original = path.read_text(encoding="utf-8")
            path.write_text(original + "\n" + line + "\n", encoding="utf-8")
            try:
                result = _checks(root)
            finally:
                path.write_text(original, encoding="utf-8")
            caught = [k for k, ok in result.items() if not ok]
            print(f"{name:40} " + (f"caught by {', '.join(caught)}" if caught else "MISSED"))
            if not caught:
                missed.append(name)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
