"""Fixtures for the lint tests: the upstream chart data under tests/data/lint and small built charts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from dsx.charts import sources
from dsx.files import documents
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

LINT_DATA = Path(__file__).resolve().parents[2] / "data" / "lint"


@pytest.fixture
def upstream_charts() -> sources.DirectorySource:
    """gpu-operator, network-operator, nvidia-dra-driver-gpu and kai-scheduler at their pinned versions."""
    return sources.DirectorySource(LINT_DATA / "charts", "test data")


@pytest.fixture
def load_recipe() -> Callable[[str], Recipe]:
    def load(name: str) -> Recipe:
        path = LINT_DATA / "recipes" / name
        return Recipe.from_dict(documents.load_mapping_file(path), source=str(path))

    return load


@pytest.fixture
def helm_component() -> Callable[..., ComponentRef]:
    return make_helm_component


@pytest.fixture
def chart_root(tmp_path: Path) -> Path:
    return tmp_path / "charts"


@pytest.fixture
def make_chart(chart_root: Path) -> Callable[..., Path]:
    def make(name: str, version: str, **kwargs: Any) -> Path:
        return write_chart(chart_root, name, version, **kwargs)

    return make


def make_recipe(*components: ComponentRef) -> Recipe:
    """A minimal valid recipe holding `components` in the given order."""
    return Recipe.from_dict(
        {
            "apiVersion": "dsx.run/v1alpha1",
            "kind": "Recipe",
            "metadata": {"name": "built", "generator": "test", "criteria": {}, "overlays": ["base"]},
            "componentRefs": [c.to_dict() for c in components],
            "deploymentOrder": [c.name for c in components],
        }
    )


@pytest.fixture
def recipe_of() -> Callable[..., Recipe]:
    return make_recipe


def make_helm_component(name: str, version: str, values: Mapping[str, Any], source: str = "") -> ComponentRef:
    return ComponentRef(
        name=name,
        type=ComponentType.HELM,
        namespace=name,
        version=version,
        chart=name,
        source=source,
        values=dict(values),
    )


def write_chart(
    root: Path,
    name: str,
    version: str,
    *,
    values: str,
    refs: tuple[str, ...] = (),
    schema: str | None = None,
    subcharts: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
    subchart_names: tuple[str, ...] = (),
) -> Path:
    """A chart in the cache layout; `subcharts` maps a key to (values.yaml text, refs) stored under charts/."""
    directory = root / name / version
    directory.mkdir(parents=True)
    (directory / "values.yaml").write_text(values)
    (directory / "values-refs.txt").write_text("".join(f"{r}\n" for r in refs))
    if schema is not None:
        (directory / "values.schema.json").write_text(schema)
    keys = [*subchart_names, *(subcharts or {})]
    if keys:
        (directory / "subcharts.txt").write_text("".join(f"{k}\n" for k in keys))
    for key, (sub_values, sub_refs) in (subcharts or {}).items():
        sub = directory / "charts" / key
        sub.mkdir(parents=True)
        (sub / "values.yaml").write_text(sub_values)
        (sub / "values-refs.txt").write_text("".join(f"{r}\n" for r in sub_refs))
    return directory
