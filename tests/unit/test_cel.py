from __future__ import annotations

import pytest

from dsx import cel
from dsx.errors import BadInputError


def test_threshold_expression() -> None:
    program = cel.compile_expression("value >= 380.0", ["value"])
    assert program.test({"value": 400.0}) is True
    assert program.test({"value": 379.9}) is False
    assert program.test({"value": 380}) is True  # int against double compares numerically


def test_nested_maps_and_lists() -> None:
    program = cel.compile_expression('event.code in [79, 48] && node.labels["pool"] == "a"', ["event", "node"])
    assert program.test({"event": {"code": 79}, "node": {"labels": {"pool": "a"}}})
    assert not program.test({"event": {"code": 13}, "node": {"labels": {"pool": "a"}}})


def test_syntax_error_names_origin() -> None:
    with pytest.raises(BadInputError, match=r"rules\.yaml: rule x: invalid CEL"):
        cel.compile_expression("value >=", ["value"], origin="rules.yaml: rule x")


def test_runtime_error_is_reported() -> None:
    program = cel.compile_expression("event.missing > 1", ["event"])
    with pytest.raises(cel.CelEvaluationError):
        program.test({"event": {}})


def test_non_boolean_condition_is_an_error() -> None:
    program = cel.compile_expression("value + 1", ["value"])
    assert program.evaluate({"value": 1}) == 2
    with pytest.raises(cel.CelEvaluationError, match="expected a boolean"):
        program.test({"value": 1})
