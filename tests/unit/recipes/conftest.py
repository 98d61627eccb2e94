"""Fixtures for the recipe engine's unit tests: a small catalog under tests/data/recipes/catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsx.recipes import catalog

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes"


@pytest.fixture
def small_catalog() -> catalog.Catalog:
    """A hand-written catalog whose every overlay exercises one matching or merge rule."""
    return catalog.load(DATA / "catalog")


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    """A writable copy of the small catalog, for tests that break it on purpose."""
    target = tmp_path / "catalog"
    shutil.copytree(DATA / "catalog", target)
    return target
