"""The recipe contract: from_dict/to_dict round trip, digest, and clear errors on malformed files."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError
from dsx.model.criteria import Criteria
from dsx.model.recipe import ComponentType, Recipe
from dsx.recipes import resolve
from dsx.recipes.catalog import Catalog


@pytest.fixture
def document(small_catalog: Catalog) -> dict[str, Any]:
    query = Criteria(service="eks", accelerator="h100", intent="training")
    return resolve.resolve(query, small_catalog).to_dict()


def test_round_trip_is_exact(document: dict[str, Any]) -> None:
    text = serialization.dump_yaml(document)
    again = Recipe.from_dict(serialization.parse_yaml(text, source="r.yaml"), source="r.yaml")
    assert serialization.dump_yaml(again.to_dict()) == text
    assert again.verify_digest()
    assert again.component("lens").type is ComponentType.MANIFEST
    assert [r.name for r in again.ordered_components()] == list(again.deployment_order)


def test_edited_content_no_longer_matches_its_digest(document: dict[str, Any]) -> None:
    document["componentRefs"][0]["version"] = "9.9.9"
    assert not Recipe.from_dict(document).verify_digest()


def test_unknown_component_lists_the_known_ones(document: dict[str, Any]) -> None:
    with pytest.raises(NotFoundError, match="no component 'gpu-operator'; components: alpha, beta, delta, lens"):
        Recipe.from_dict(document, source="r.yaml").component("gpu-operator")


def _broken(document: dict[str, Any], edit: str) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    refs = doc["componentRefs"]
    if edit == "kind":
        doc["kind"] = "RecipeResult"
    elif edit == "type":
        refs[0]["type"] = "Chart"
    elif edit == "version":
        del refs[0]["version"]
    elif edit == "order":
        doc["deploymentOrder"] = list(reversed(doc["deploymentOrder"]))
    elif edit == "missing-in-order":
        doc["deploymentOrder"] = doc["deploymentOrder"][1:]
    elif edit == "duplicate":
        refs.append(copy.deepcopy(refs[0]))
    elif edit == "dangling":
        refs[0]["dependencyRefs"] = ["ghost"]
    elif edit == "field":
        refs[0]["helm"] = {}
    elif edit == "assert":
        refs[0]["healthCheckAsserts"] = [{"kind": "Service", "name": "x"}]
    elif edit == "constraint":
        doc["constraints"] = ["K8s.server.version ~ 1"]
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("kind", "not a dsx recipe"),
        ("type", "allowed values: Helm, Manifest, Kustomize"),
        ("version", "r.yaml: componentRefs[0].version: required"),
        ("order", "before its dependency"),
        ("missing-in-order", "must list every component exactly once"),
        ("duplicate", "duplicate component 'alpha'"),
        ("dangling", "unknown component 'ghost'"),
        ("field", "componentRefs[0]: field: 'helm' is not allowed; allowed values: name, type"),
        ("assert", "componentRefs[0]: alpha: healthCheckAsserts[0]: kind: 'Service' is not allowed"),
        ("constraint", "constraints[0]"),
    ],
)
def test_malformed_recipes_name_file_and_field(document: dict[str, Any], edit: str, message: str) -> None:
    with pytest.raises(BadInputError) as info:
        Recipe.from_dict(_broken(document, edit), source="r.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("r.yaml")
