"""The catalog compiled at build time (`dsx.recipes.compiled`) is the catalog as it is now."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dsx import catalog as catalog_data
from dsx.model import dimensions
from dsx.recipes import catalog, compiled, resolve


def test_the_packaged_compiled_catalog_is_current() -> None:
    """Fails when the catalog (or the code that compiles it) changed after the build: `make install`."""
    packaged = catalog_data.compiled()
    assert packaged is not None, f"{catalog_data.COMPILED} is missing: run `make install` (or hatch_build.py)"
    assert packaged == json.loads(compiled.text()), f"{catalog_data.COMPILED} is stale: run `make install`"
    assert packaged["format"] == compiled.FORMAT


def test_load_reads_the_packaged_file_and_compiles_without_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    marker = {"format": compiled.FORMAT, "overlays": [], "marker": True}
    monkeypatch.setattr(catalog_data, "COMPILED", tmp_path / "compiled.json")
    (tmp_path / "compiled.json").write_text(json.dumps(marker), encoding="utf-8")
    compiled.load.cache_clear()
    try:
        assert compiled.load() == marker  # the shipped catalog comes from the file, unchecked
        (tmp_path / "compiled.json").unlink()
        compiled.load.cache_clear()
        assert compiled.load() == catalog.load().compiled  # no build ran: compiled in the process
        (tmp_path / "compiled.json").write_text(json.dumps({**marker, "format": compiled.FORMAT - 1}), "utf-8")
        compiled.load.cache_clear()
        assert "marker" not in compiled.load()  # a file of another shape is not trusted
    finally:
        compiled.load.cache_clear()


def test_every_recipe_resolves_the_same_from_the_packaged_and_a_fresh_compilation() -> None:
    fresh = catalog.load().compiled
    packaged = catalog_data.compiled()
    assert packaged is not None
    for overlay in fresh["overlays"]:
        query = dimensions.normalize_flags(dict(overlay["criteria"]))
        assert resolve.document(query, packaged) == resolve.document(query, fresh), overlay["name"]


def test_a_catalog_of_the_callers_own_is_compiled_in_the_process(tmp_path: Path) -> None:
    root = tmp_path / "catalog"
    for folder in ("overlays", "components"):
        shutil.copytree(catalog.default_root() / folder, root / folder)
    edited = next(root.rglob("eks-inference.yaml"))
    text = edited.read_text(encoding="utf-8")
    assert "K8s.server.version >= 1.30" in text
    edited.write_text(text.replace("K8s.server.version >= 1.30", "K8s.server.version >= 1.31"), encoding="utf-8")
    query = {"service": "eks", "intent": "inference"}
    mine = compiled.load(root)
    assert mine == catalog.load(root).compiled
    constraints = {c["name"]: c["value"] for c in resolve.document(query, mine)["constraints"]}
    shipped = {c["name"]: c["value"] for c in resolve.document(query)["constraints"]}
    assert (constraints["K8s.server.version"], shipped["K8s.server.version"]) == ("1.31", "1.30")
