"""Area of concern: documents decoded by schema (dsx.model.schema) fail like the rest of dsx —
file, field path, what was expected and the allowed values — and old snake_case keys are renamed
only where a Struct has the camelCase field."""

from __future__ import annotations

import enum
import math
from typing import Annotated

import msgspec
import pytest

from dsx.errors import BadInputError, CatalogError
from dsx.model import schema


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Leaf(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True, kw_only=True):
    colour: Colour = Colour.RED
    max_count: int = 1
    labels: dict[str, str] = {}


class Root(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True, kw_only=True):
    name: str
    leaves: list[Leaf] = []
    leaf: Leaf = Leaf()
    ratio: float = 0.5


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "f.yaml.name: required"),
        ({"name": 3}, "f.yaml.name: expected a string, got 3"),
        (
            {"name": "a", "colour": "red"},
            "f.yaml: field: 'colour' is not allowed; allowed values: name, leaves, leaf, ratio",
        ),
        (
            {"name": "a", "leaves": [{"colour": "green"}]},
            "f.yaml.leaves[0]: colour: 'green' is not allowed; allowed values: red, blue",
        ),
        ({"name": "a", "leaf": {"maxCount": True}}, "f.yaml.leaf.maxCount: expected an integer, got True"),
        ({"name": "a", "ratio": math.nan}, "f.yaml.ratio: expected a finite number, got nan"),
        ({"name": "a", "ratio": "x" * 200}, "f.yaml.ratio: expected a number, got '" + "x" * 58 + "…"),
    ],
)
def test_a_mismatch_names_the_file_the_field_and_what_is_allowed(data: object, message: str) -> None:
    with pytest.raises(BadInputError) as info:
        schema.decode(data, Root, source="f.yaml")
    assert str(info.value) == message


def test_the_separator_and_the_error_class_are_the_callers() -> None:
    with pytest.raises(CatalogError, match=r"^c.yaml: leaf: field: 'size' is not allowed; allowed values: colour"):
        schema.decode({"name": "a", "leaf": {"size": 1}}, Root, source="c.yaml", separator=": ", error=CatalogError)


class Deep(msgspec.Struct, frozen=True, kw_only=True):
    """A float only under a dict of unions of lists: the finite-number rule must still find it."""

    values: dict[str, list[int | float] | None] = {}
    untyped: object = None


def test_a_float_deep_inside_or_in_an_untyped_field_is_still_checked() -> None:
    with pytest.raises(BadInputError, match=r"^d: values\.a\[1\]: expected a finite number, got inf$"):
        schema.decode({"values": {"a": [1, math.inf]}}, Deep, source="d", separator=": ")
    with pytest.raises(BadInputError, match=r"^d: untyped: expected a finite number, got nan$"):
        schema.decode({"untyped": math.nan}, Deep, source="d", separator=": ")


class Tagged(msgspec.Struct, frozen=True, kw_only=True):
    tags: dict[str, str] = {}
    groups: dict[str, list[int]] = {}
    names: list[Annotated[str, msgspec.Meta(min_length=1)]] = []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tags": {"a": "x", "b": 1}}, "t: tags.b: expected a string, got 1"),
        ({"tags": {"a": "x", "b.c": None}}, "t: tags[b.c]: expected a string, got None"),
        ({"groups": {"a": [1], "b": [2, "x"]}}, "t: groups.b[1]: expected an integer, got 'x'"),
        ({"tags": {1: "a"}}, "t: tags: every key must be a string, one is an integer"),
        ({"names": ["a", ""]}, "t: names[1]: must not be empty"),
    ],
)
def test_a_bad_entry_of_a_mapping_is_named_by_its_key(data: object, message: str) -> None:
    """msgspec says `$.tags[...]` for "some value of this mapping"; the message names the key."""
    with pytest.raises(BadInputError) as info:
        schema.decode(data, Tagged, source="t", separator=": ")
    assert str(info.value) == message


def test_only_kinds_that_can_hold_a_float_are_walked_for_one() -> None:
    assert schema._may_hold_floats(Root) and schema._may_hold_floats(Deep)
    assert not schema._may_hold_floats(Leaf)  # enums, integers and a dict of strings


def test_query_strings_decode_when_not_strict() -> None:
    assert schema.decode({"name": "a", "ratio": "0.25"}, Root, source="q", strict=False).ratio == 0.25


def test_old_spellings_are_renamed_only_at_struct_fields() -> None:
    data = {"name": "a", "leaf": {"max_count": 2, "labels": {"keep_me": "x"}}, "leaves": [{"max_count": 3}]}
    current, found = schema.renamed(data, Root)
    assert found == [("leaf.max_count", "maxCount"), ("leaves[0].max_count", "maxCount")]
    decoded = schema.decode(current, Root, source="f")
    assert decoded.leaf == Leaf(max_count=2, labels={"keep_me": "x"}) and decoded.leaves[0].max_count == 3


def test_a_null_section_means_its_defaults_and_both_spellings_stay_both() -> None:
    current, found = schema.renamed({"name": "a", "leaf": None}, Root)
    assert found == [] and schema.decode(current, Root, source="f").leaf == Leaf()
    current, found = schema.renamed({"name": "a", "leaf": {"max_count": 1, "maxCount": 2}}, Root)
    assert found == []
    with pytest.raises(BadInputError, match="field: 'max_count' is not allowed"):
        schema.decode(current, Root, source="f")


def test_camel_is_msgspecs_rename() -> None:
    assert [schema.camel(n) for n in ("dry_run", "max_quarantined_percent", "name")] == [
        "dryRun",
        "maxQuarantinedPercent",
        "name",
    ]


def test_camel_keys_renames_every_key_but_those_of_data_mappings_and_leaves_values() -> None:
    record = {"pci_address": "0000:3b:00.0", "nvlink5_decode": {"intr_info": "0x1"}, "steps": [{"step_time": 1}]}
    record["labels"] = {"team_a": "is_fatal"}
    assert schema.camel_keys(record, data_keys=frozenset({"labels"})) == {
        "pciAddress": "0000:3b:00.0",
        "nvlink5Decode": {"intrInfo": "0x1"},
        "steps": [{"stepTime": 1}],
        "labels": {"team_a": "is_fatal"},
    }
