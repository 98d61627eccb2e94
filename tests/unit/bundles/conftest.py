"""Fixtures for bundle tests: the small fixture recipe and rendered bundles for every deployer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsx.bundles import render
from dsx.bundles.options import BundleOptions, Deployer
from dsx.file_tree import FileTree
from dsx.files import documents
from dsx.model import recipe as recipe_model

BUNDLE_DATA = Path(__file__).resolve().parents[2] / "data" / "bundles"
SMALL_RECIPE = BUNDLE_DATA / "recipe-small.yaml"


@pytest.fixture
def small_recipe() -> recipe_model.Recipe:
    return documents.recipe(str(SMALL_RECIPE))


@pytest.fixture
def render_bundle(small_recipe: recipe_model.Recipe) -> Callable[..., FileTree]:
    def _render(deployer: Deployer, recipe: recipe_model.Recipe | None = None, **options: object) -> FileTree:
        return render.render(recipe or small_recipe, deployer, BundleOptions(**options))  # type: ignore[arg-type]

    return _render
