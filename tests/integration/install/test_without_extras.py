"""Area of concern: dsx installed without any extra (issue 12) — the core commands work, and a
command that needs an extra exits 3 naming the extra and the pip command, never 8.

A fresh virtual environment gets exactly the base dependencies' closure (and the build backend),
pinned and hash-checked from requirements.lock, then dsx itself from this checkout."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from .locked import closure, lock_entries

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
BUILD_BACKEND = ("hatchling", "editables")  # editable installs without build isolation


@pytest.fixture(scope="module")
def bare_dsx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bare")
    core = [str(r) for r in (metadata.requires("dsx") or []) if "extra ==" not in str(r)]
    needed = closure([*core, *BUILD_BACKEND])
    requirements = folder / "requirements.txt"
    requirements.write_text(lock_entries(needed))
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    subprocess.run([*pip, "--require-hashes", "--no-deps", "-r", str(requirements)], check=True, timeout=300)
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", "-e", str(REPO)], check=True, timeout=300)
    return venv / "bin" / "dsx"


def _run(dsx: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(dsx), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd)


def test_no_extra_is_installed(bare_dsx: Path) -> None:
    python = bare_dsx.parent / "python"
    optional = ("lightkube", "fastapi", "psycopg", "torch", "pynvml", "cel_expr_python")
    probe = f"import importlib.util as u; print([m for m in {optional!r} if u.find_spec(m)])"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_core_commands_work_without_extras(bare_dsx: Path, tmp_path: Path) -> None:
    recipe = _run(bare_dsx, "recipe", "--service", "eks", "--accelerator", "h100", "-o", "recipe.yaml", cwd=tmp_path)
    assert recipe.returncode == 0, recipe.stderr
    bundle = _run(bare_dsx, "bundle", "--recipe", "recipe.yaml", "--deployer", "helm", "--output", "b", cwd=tmp_path)
    assert bundle.returncode == 0, bundle.stderr
    assert (tmp_path / "b" / "checksums.txt").is_file()
    listed = _run(bare_dsx, "--help", cwd=tmp_path)
    assert listed.returncode == 0 and "serve" in listed.stdout and "sentinel" in listed.stdout


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("serve", "--print-openapi"), "api"),
        (("sim", "status"), "kube"),
        (("sentinel", "status", "--store", "postgresql://localhost/x"), "store"),
    ],
)
def test_a_command_needing_an_extra_names_it_and_the_install_command(
    bare_dsx: Path, tmp_path: Path, args: tuple[str, ...], extra: str
) -> None:
    done = _run(bare_dsx, *args, cwd=tmp_path)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert f"needs the optional extra '{extra}'" in done.stderr
    assert f"pip install 'dsx[{extra}]'" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
