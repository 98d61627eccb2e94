"""Area of concern: `make dist` (issue 16, item 6) — the wheel, installed with pip into a fresh
virtual environment (its dependencies pinned and hash-checked from requirements.lock), is a
working `dsx`: version, recipes from the shipped catalog, and `dsx sim up` naming the build
script the wheel carries when the control-plane binaries are missing."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from .locked import closure, lock_entries

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
EXTRAS = ("kube",)  # dsx sim up needs the Kubernetes client


def _roots() -> list[str]:
    """dsx's base requirements and those of EXTRAS, without their markers."""
    roots = []
    for text in metadata.requires("dsx") or []:
        requirement = Requirement(text)
        marker = str(requirement.marker or "")
        if not marker or any(f'extra == "{extra}"' in marker for extra in EXTRAS):
            requirement.marker = None
            roots.append(str(requirement))
    return roots


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dist")
    make = subprocess.run(
        ["make", "-C", str(REPO), "--no-print-directory", "-n", "dist"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "pip wheel" in make.stdout and "--no-build-isolation" in make.stdout  # the test builds as make dist does
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    build = [*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(folder), str(REPO)]
    subprocess.run(build, check=True, timeout=300)
    (built,) = folder.glob("dsx-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel-venv")
    requirements = folder / "requirements.txt"
    requirements.write_text(lock_entries(closure(_roots())))
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    subprocess.run([*pip, "--require-hashes", "--no-deps", "-r", str(requirements)], check=True, timeout=600)
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True, timeout=300)
    return venv


def _run(venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "dsx"), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd, env=env
    )


def test_the_wheel_carries_the_catalog_and_the_build_script(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "dsx/sim/build-control-plane.sh" in names
    shipped = {n for n in names if n.startswith("dsx/catalog/")}
    in_checkout = {
        str(p.relative_to(REPO / "src")) for p in (REPO / "src" / "dsx" / "catalog").rglob("*") if p.is_file()
    }
    assert {n for n in in_checkout if "__pycache__" not in n} <= shipped
    assert not [n for n in names if n.startswith(("tests/", "hack/", "docs/"))]


def test_the_installed_wheel_is_a_working_dsx(installed: Path, tmp_path: Path) -> None:
    version = _run(installed, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("dsx, version "), version.stderr
    recipe = _run(installed, "recipe", "--service", "eks", "--accelerator", "h100", "-o", "r.yaml", cwd=tmp_path)
    assert recipe.returncode == 0, recipe.stderr
    assert "kind: Recipe" in (tmp_path / "r.yaml").read_text()
    located = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "from dsx.sim import binaries; print(binaries.build_script())"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    script = Path(located.stdout.strip())
    assert script.is_file() and script.is_relative_to(installed), script


def test_sim_up_without_binaries_names_the_shipped_script(installed: Path, tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "PATH": f"{installed / 'bin'}:/usr/bin:/bin",  # no Go: dsx must say how, not build for 10 minutes
        "DSX_CACHE_DIR": str(tmp_path / "cache"),
        "DSX_STATE_DIR": str(tmp_path / "state"),
    }
    env |= {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL")}
    up = _run(installed, "sim", "up", "--name", "wheel", cwd=tmp_path, env=env)
    assert up.returncode == 3, (up.returncode, up.stderr)
    assert "control-plane binaries missing" in up.stderr and "no `go` on PATH" in up.stderr
    assert f"bash {installed}" in up.stderr and "dsx/sim/build-control-plane.sh" in up.stderr
