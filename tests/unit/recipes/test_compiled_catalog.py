"""The compiled catalog cache: the same recipe as the checked catalog, rebuilt whenever a file changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsx import settings
from dsx.model.criteria import Criteria
from dsx.recipes import catalog, compiled, resolve

QUERY = Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training")


@pytest.fixture
def catalog_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "catalog"
    for folder in ("overlays", "components"):
        shutil.copytree(catalog.default_root() / folder, root / folder)
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "_loaded", {})
    return root


@pytest.mark.parametrize(
    "environ",
    [{}, {"DSX_CACHE_DIR": "/x/cache"}, {"XDG_CACHE_HOME": "/xdg"}, {"DSX_CACHE_DIR": "", "XDG_CACHE_HOME": "/xdg"}],
)
def test_the_cache_folder_is_the_one_settings_names(environ: dict[str, str]) -> None:
    assert Path(compiled.cache_dir(environ)) == settings.from_env(environ).cache_dir


def test_the_default_root_is_the_shipped_catalog() -> None:
    assert Path(compiled.default_root()) == catalog.default_root()


def test_a_cached_catalog_resolves_as_the_checked_one(catalog_copy: Path) -> None:
    fresh = compiled.load(str(catalog_copy))
    assert list((catalog_copy.parent / "cache" / "recipes").glob("compiled-*.marshal"))
    compiled._loaded.clear()
    cached = compiled.load(str(catalog_copy))  # from the file this time
    assert cached == fresh
    assert resolve.document(QUERY.to_dict(), cached) == resolve.resolve(QUERY).to_dict()


def test_an_edited_file_is_compiled_again(catalog_copy: Path) -> None:
    before = resolve.document(QUERY.to_dict(), compiled.load(str(catalog_copy)))
    in_recipe = {r["name"] for r in before["componentRefs"] if r["manifests"]}
    manifest_dirs = [p for p in (catalog_copy / "components").iterdir() if p.is_dir() and p.name in in_recipe]
    edited = next(f for d in manifest_dirs for f in d.iterdir() if f.is_file())  # a manifest, not a YAML file
    edited.write_text(edited.read_text() + "# edited\n")
    compiled._loaded.clear()
    catalog.load.cache_clear()
    after = compiled.load(str(catalog_copy))
    component = edited.parent.name
    assert after["components"][component]["manifests"][edited.name].endswith("# edited\n")


def test_an_unreadable_cache_file_is_rebuilt(catalog_copy: Path) -> None:
    expected = compiled.load(str(catalog_copy))
    (cache_file,) = (catalog_copy.parent / "cache" / "recipes").glob("compiled-*.marshal")
    cache_file.write_bytes(b"not marshal")
    compiled._loaded.clear()
    assert compiled.load(str(catalog_copy)) == expected
    assert cache_file.read_bytes() != b"not marshal"
