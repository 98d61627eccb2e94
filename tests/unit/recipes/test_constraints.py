"""Constraint syntax and version-aware, precision-aware comparison."""

from __future__ import annotations

import pytest

from dsx.errors import BadInputError
from dsx.model import constraints
from dsx.model.constraints import Operator


def test_string_and_mapping_forms_parse_to_the_same_constraint() -> None:
    text = constraints.parse_constraint("K8s.server.version >= 1.30", source="t")
    mapping = constraints.parse_constraint(
        {"name": "K8s.server.version", "operator": ">=", "value": "1.30"}, source="t"
    )
    assert text == mapping == constraints.Constraint("K8s.server.version", Operator.GE, "1.30")


def test_key_may_contain_dots_and_slashes() -> None:
    parsed = constraints.parse_constraint("OS.sysctl./proc/sys/kernel/osrelease >= 6.8", source="t")
    assert parsed.name == "OS.sysctl./proc/sys/kernel/osrelease"
    assert parsed.measurement_type == "OS"


@pytest.mark.parametrize(
    ("expression", "actual", "expected"),
    [
        ("K8s.server.version >= 1.30", "v1.33.5-eks-3025e55", True),
        ("K8s.server.version >= 1.32.4", "v1.32.3", False),
        ("K8s.server.version >= 1.32.4", "1.32.4", True),
        ("K8s.server.version < 1.34", "v1.33.9", True),
        ("OS.release.VERSION_ID == 24.04", "24.04", True),
        ("OS.release.VERSION_ID == 24.04", "22.04", False),
        ("OS.release.VERSION_ID != 24.04", "22.04", True),
        ("GPU.driver.version >= 580", "580.105.08", True),
        ("GPU.driver.version >= 580", "570.86.16", False),
        ("GPU.driver.version > 580", "580.105.08", False),
        ("OS.sysctl./proc/sys/kernel/osrelease >= 6.8", "6.8.0-1028-aws", True),
        ("OS.sysctl./proc/sys/kernel/osrelease >= 6.8", "6.5.0-1024-aws", False),
        ("OS.release.ID == ubuntu", "Ubuntu", True),
        ("OS.release.ID != ubuntu", "rhel", True),
        ("K8s.server.version <= 1.10", "1.9", True),
    ],
)
def test_comparison(expression: str, actual: str, expected: bool) -> None:
    assert constraints.parse_constraint(expression, source="t").holds(actual) is expected


def test_versions_compare_numerically_not_as_text() -> None:
    assert constraints.compare("1.10", Operator.GT, "1.9")
    assert not constraints.compare("1.9", Operator.GT, "1.10")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("K8s.server.version", "is not"),
        ("K8s.version >= 1.30", "is not {Type}.{Subtype}.{Key}"),
        ("Disk.root.size >= 10", "constraint type: 'Disk'"),
        ("K8s.server.version >= latest", "needs a version value"),
        ({"name": "K8s.server.version", "value": "1.30"}, "has no operator"),
        ({"name": "K8s.server.version", "operator": "=~", "value": "1"}, "allowed values: >=, <=, >, <, ==, !="),
        ({"name": "K8s.server.version", "operator": ">=", "value": "1", "unit": "x"}, "field: 'unit' is not allowed"),
        (42, "expected a string or a mapping, got 42"),
    ],
)
def test_malformed_constraints_are_bad_input(raw: object, message: str) -> None:
    with pytest.raises(BadInputError) as info:
        constraints.parse_constraint(raw, source="overlay.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("overlay.yaml")


def test_ordering_a_non_version_actual_value_is_an_error() -> None:
    constraint = constraints.parse_constraint("K8s.server.version >= 1.30", source="t")
    with pytest.raises(BadInputError, match="as versions"):
        constraint.holds("unknown")


def test_list_parsing_names_the_index() -> None:
    with pytest.raises(BadInputError, match=r"spec.constraints\[1\]"):
        constraints.parse_constraints(["K8s.server.version >= 1", "nope"], source="spec.constraints")
    assert constraints.parse_constraints(None, source="x") == ()
