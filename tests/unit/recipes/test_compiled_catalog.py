"""The compiled catalog cache: the same recipe as the checked catalog, rebuilt whenever a file changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsx.model.criteria import Criteria
from dsx.recipes import catalog, compiled, resolve


def cache_beside(root: Path) -> str:
    """The cache folder the tests hand in, beside their catalog copy."""
    return str(root.parent / "cache")


QUERY = Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training")


@pytest.fixture
def catalog_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "catalog"
    for folder in ("overlays", "components"):
        shutil.copytree(catalog.default_root() / folder, root / folder)
    monkeypatch.setattr(compiled, "_loaded", {})
    return root


def test_without_a_cache_folder_nothing_is_written(
    catalog_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The domain reads no environment: a caller that names no folder gets no cache, wherever
    $DSX_CACHE_DIR points."""
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "env-cache"))
    catalog.load.cache_clear()
    assert compiled.load(str(catalog_copy))["overlays"]
    assert not (tmp_path / "env-cache").exists()


def test_the_default_root_is_the_shipped_catalog() -> None:
    assert Path(compiled.default_root()) == catalog.default_root()


def test_a_cached_catalog_resolves_as_the_checked_one(catalog_copy: Path) -> None:
    fresh = compiled.load(str(catalog_copy), cache_dir=cache_beside(catalog_copy))
    assert list((catalog_copy.parent / "cache" / "recipes").glob("compiled-*.marshal"))
    compiled._loaded.clear()
    cached = compiled.load(str(catalog_copy), cache_dir=cache_beside(catalog_copy))  # from the file this time
    assert cached == fresh
    assert resolve.document(QUERY.to_dict(), cached) == resolve.resolve(QUERY).to_dict()


def test_an_edited_file_is_compiled_again(catalog_copy: Path) -> None:
    before = resolve.document(QUERY.to_dict(), compiled.load(str(catalog_copy), cache_dir=cache_beside(catalog_copy)))
    in_recipe = {r["name"] for r in before["componentRefs"] if r["manifests"]}
    manifest_dirs = [p for p in (catalog_copy / "components").iterdir() if p.is_dir() and p.name in in_recipe]
    edited = next(f for d in manifest_dirs for f in d.iterdir() if f.is_file())  # a manifest, not a YAML file
    edited.write_text(edited.read_text() + "# edited\n")
    compiled._loaded.clear()
    catalog.load.cache_clear()
    after = compiled.load(str(catalog_copy), cache_dir=cache_beside(catalog_copy))
    component = edited.parent.name
    assert after["components"][component]["manifests"][edited.name].endswith("# edited\n")


def test_an_unreadable_cache_file_is_rebuilt(catalog_copy: Path) -> None:
    expected = compiled.load(str(catalog_copy), cache_dir=cache_beside(catalog_copy))
    (cache_file,) = (catalog_copy.parent / "cache" / "recipes").glob("compiled-*.marshal")
    cache_file.write_bytes(b"not marshal")
    compiled._loaded.clear()
    assert compiled.load(str(catalog_copy), cache_dir=cache_beside(catalog_copy)) == expected
    assert cache_file.read_bytes() != b"not marshal"
