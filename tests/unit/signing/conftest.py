"""Fixtures for signing tests: keys of both algorithms and a rendered, signed bundle on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.files import documents
from dsx.files import signing as signing_files
from dsx.signing import attest, keys
from dsx.signing.signer import Algorithm

SMALL_RECIPE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"


@pytest.fixture(scope="session")
def key_pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """name → (private, public) for `ed25519`, `p256` and an unrelated `other` key."""
    base = tmp_path_factory.mktemp("keys")
    pairs = {}
    for name, algorithm in (
        ("ed25519", Algorithm.ED25519),
        ("p256", Algorithm.ECDSA_P256),
        ("other", Algorithm.ED25519),
    ):
        paths = signing_files.write_key_pair(base / name, algorithm)
        pairs[name] = (paths.private, paths.public)
    return pairs


@pytest.fixture(params=["ed25519", "p256"])
def algorithm_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def signed_bundle(tmp_path: Path, key_pairs: dict[str, tuple[Path, Path]], algorithm_name: str) -> Path:
    recipe = documents.recipe(str(SMALL_RECIPE))
    signer = signing_files.load_signer(key_pairs[algorithm_name][0])
    out = tmp_path / "bundle"
    tree.write_tree(attest.attest_bundle(render.render(recipe, Deployer.HELM), signer), out)
    return out


@pytest.fixture
def trusted(key_pairs: dict[str, tuple[Path, Path]], algorithm_name: str) -> list[keys.TrustedKey]:
    return [signing_files.load_public_key(key_pairs[algorithm_name][1])]
