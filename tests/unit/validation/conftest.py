"""Fixtures for the validation unit tests: recorded API objects served by the in-memory reader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.model import recipe, snapshot
from dsx.validation import cluster_snapshot, host_snapshot, reading

DATA = Path(__file__).resolve().parents[2] / "data" / "validation"


def load_items(relative: str) -> list[dict[str, Any]]:
    """The `items` of a recorded `kubectl get -o yaml` List."""
    doc = serialization.load_mapping_file(DATA / relative)
    items: list[dict[str, Any]] = doc["items"]
    return items


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def recorded_items() -> Callable[[str], list[dict[str, Any]]]:
    return load_items


@pytest.fixture
def recorded_cluster() -> reading.FakeClusterReader:
    """An EKS cluster with one H100 node, one CPU node and Helm release Secrets, as recorded."""
    reader = reading.FakeClusterReader(version="v1.33.5-eks-3025e55")
    reader.add(*load_items("cluster/nodes.yaml"), *load_items("helm/release-secrets.yaml"))
    return reader


def make_recipe(
    *,
    constraints: list[str] | None = None,
    components: list[dict[str, Any]] | None = None,
    criteria: dict[str, Any] | None = None,
    certification: dict[str, Any] | None = None,
) -> recipe.Recipe:
    """A resolved recipe document with just the parts a test cares about."""
    refs = [
        {"type": "Helm", "values": {}, "dependencyRefs": [], "healthCheckAsserts": [], "manifests": {}, **c}
        for c in components or []
    ]
    doc: dict[str, Any] = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {
            "name": "test",
            "generator": "dsx/test",
            "criteria": criteria or {"service": "eks", "accelerator": "h100"},
            "overlays": ["base"],
            "unvalidatedCriteria": [],
        },
        "constraints": constraints or [],
        "componentRefs": refs,
        "deploymentOrder": [c["name"] for c in refs],
    }
    if certification is not None:
        doc["certification"] = certification
    return recipe.Recipe.from_dict(doc, source="recipe.yaml").with_digest()


RecipeFactory = Callable[..., recipe.Recipe]


@pytest.fixture
def recipe_factory() -> RecipeFactory:
    return make_recipe


@pytest.fixture
def recorded_snapshot(recorded_cluster: reading.FakeClusterReader) -> snapshot.Snapshot:
    return cluster_snapshot.collect(recorded_cluster, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")


@pytest.fixture
def merged_snapshot(recorded_snapshot: snapshot.Snapshot) -> snapshot.Snapshot:
    """The recorded cluster plus the node snapshot of its H100 host."""
    root = DATA / "hosts" / "h100-ubuntu"
    xml = (DATA / "hosts" / "h100-ubuntu.nvidia-smi.xml").read_text()
    node = host_snapshot.collect(
        root, node_name="ip-10-0-12-34.ec2.internal", generator="dsx/test", nvidia_smi=lambda: xml
    )
    return snapshot.merge([recorded_snapshot, node])
