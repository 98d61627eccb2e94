from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError

YAML11_TRAPS = ["on", "off", "yes", "no", "y", "n", "true", "NO", "1.10", "0755", "1e3", "~", "null", "12:30"]


@pytest.mark.parametrize("value", YAML11_TRAPS)
def test_yaml11_trap_strings_stay_strings(value: str) -> None:
    text = serialization.dump_yaml({"k": value})
    assert yaml.safe_load(text) == {"k": value}
    assert f"k: {value}\n" != text  # quoted


def test_multiline_strings_use_literal_blocks() -> None:
    text = serialization.dump_yaml({"script": "a\nb\n"})
    assert "script: |" in text


def test_key_order_is_insertion_order() -> None:
    assert serialization.dump_yaml({"b": 1, "a": 2}).splitlines() == ["b: 1", "a: 2"]


text = st.text(st.characters(min_codepoint=1, max_codepoint=0x2FFF, exclude_categories=("Cs",)), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_yaml_round_trips(value: object) -> None:
    assert yaml.safe_load(serialization.dump_yaml(value)) == value


@given(st.dictionaries(text, st.integers(-(2**53) + 1, 2**53 - 1), max_size=6))
def test_digest_ignores_key_order(mapping: dict[str, int]) -> None:
    reordered = dict(reversed(list(mapping.items())))
    assert serialization.digest(mapping) == serialization.digest(reordered)


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(BadInputError, match=r"bad\.yaml: malformed YAML \(line"):
        serialization.load_yaml_file(bad)


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"missing\.yaml"):
        serialization.load_yaml_file(tmp_path / "missing.yaml")


def test_non_mapping_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "list.yaml"
    f.write_text("- 1\n")
    with pytest.raises(BadInputError, match="expected a mapping"):
        serialization.load_mapping_file(f)


def test_digest_rejects_integers_outside_the_json_domain() -> None:
    with pytest.raises(BadInputError, match="2\\^53"):
        serialization.digest({"replicas": 2**60})
