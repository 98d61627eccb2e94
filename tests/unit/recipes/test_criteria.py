"""Criteria parsing: allowed values, case, the gpu alias, nodes, and the messages on bad input."""

from __future__ import annotations

import pytest

from dsx.errors import BadInputError
from dsx.model import criteria


def test_values_are_case_insensitive_and_gpu_is_an_alias_for_accelerator() -> None:
    parsed = criteria.parse_criteria({"Service": "EKS", "gpu": "H100", "os": "Ubuntu"}, source="flags")
    assert parsed == criteria.Criteria(service="eks", accelerator="h100", os="ubuntu")


def test_unset_and_empty_fields_mean_any() -> None:
    parsed = criteria.parse_criteria({"intent": "", "platform": None}, source="flags")
    assert parsed.intent == criteria.ANY
    assert parsed.platform == criteria.ANY
    assert parsed.specified() == {}


def test_unknown_value_names_source_field_and_every_allowed_value() -> None:
    with pytest.raises(BadInputError) as info:
        criteria.parse_criteria({"accelerator": "h900"}, source="config.yaml")
    message = str(info.value)
    assert message.startswith("config.yaml: accelerator: 'h900' is not allowed")
    for allowed in criteria.DIMENSIONS["accelerator"]:
        assert allowed in message
    assert info.value.exit_code == 2


def test_unknown_key_lists_the_keys() -> None:
    with pytest.raises(BadInputError, match=r"criteria key: 'region'.*service, accelerator, os"):
        criteria.parse_criteria({"region": "us-east-1"}, source="c.yaml")


def test_same_dimension_twice_is_rejected() -> None:
    with pytest.raises(BadInputError, match="accelerator given twice"):
        criteria.parse_criteria({"gpu": "h100", "accelerator": "h100"}, source="c.yaml")


@pytest.mark.parametrize("value", [0, -3, "many", True, 1.5])
def test_nodes_must_be_a_positive_integer(value: object) -> None:
    with pytest.raises(BadInputError, match="nodes"):
        criteria.parse_criteria({"nodes": value}, source="flags")


def test_nodes_accepts_integer_text() -> None:
    assert criteria.parse_criteria({"nodes": " 16 "}, source="flags").nodes == 16


def test_name_joins_specified_values_in_table_order() -> None:
    query = criteria.Criteria(platform="kubeflow", service="eks", intent="training", accelerator="h100")
    assert query.name() == "eks-h100-training-kubeflow"
    assert criteria.Criteria().name() == "any"


def test_to_dict_lists_every_dimension_and_nodes_only_when_given() -> None:
    assert criteria.Criteria(service="gke").to_dict() == {
        "service": "gke",
        "accelerator": "any",
        "os": "any",
        "intent": "any",
        "platform": "any",
    }
    assert criteria.Criteria(nodes=4).to_dict()["nodes"] == 4
