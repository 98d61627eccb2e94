from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError
from dsx.files import documents

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
        documents.load_yaml_file(bad)


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"missing\.yaml"):
        documents.load_yaml_file(tmp_path / "missing.yaml")


def test_non_mapping_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "list.yaml"
    f.write_text("- 1\n")
    with pytest.raises(BadInputError, match="expected a mapping"):
        documents.load_mapping_file(f)


def test_digest_rejects_integers_outside_the_json_domain() -> None:
    with pytest.raises(BadInputError, match="2\\^53"):
        serialization.digest({"replicas": 2**60})


# --- the safe loader ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb: 2\na: 3\n", r"doc\.yaml: a: key appears twice \(lines 1 and 3\)"),
        ("spec:\n  x: .nan\n", r"doc\.yaml: spec\.x: '\.nan' is not a finite number"),
        ("refs: [1, -.inf]\n", r"doc\.yaml: refs\[1\]: '-\.inf' is not a finite number"),
        ("n: 18446744073709551616\n", r"doc\.yaml: n: 18446744073709551616 is out of range; integers must fit 64 bits"),
        ("n: 1" + "0" * 5000 + "\n", r"doc\.yaml: n: integer of 5001 characters is out of range"),
        ("a: &a [*a]\n", r"doc\.yaml: a\[0\]: an alias refers to a node that contains it"),
        ("[" * 101 + "]" * 101, r"doc\.yaml: (\[0\])+\.\.\.: nested deeper than 100 levels \(limit 100\)"),
        ("deep: &d " + "[" * 60 + "]" * 60 + "\nuse: " + "[" * 50 + "*d" + "]" * 50, r"use(\[0\])+.*limit 100"),
        ("b: !!binary aGk=\n", r"doc\.yaml: malformed YAML \(line 1, column 4\)"),
        ("a: 1\n---\nb: 2\n", r"doc\.yaml: expected one YAML document, found 2"),
    ],
)
def test_the_loader_refuses_naming_file_field_and_limit(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        serialization.parse_yaml(text, source="doc.yaml")


def test_aliases_within_go_yamls_ratio_and_merge_keys_load() -> None:
    text = "base: &b {x: 1, y: [1, 2]}\none: {<<: *b, x: 2}\ntwo: *b\n"
    assert serialization.parse_yaml(text, source="doc.yaml") == {
        "base": {"x": 1, "y": [1, 2]},
        "one": {"x": 2, "y": [1, 2]},
        "two": {"x": 1, "y": [1, 2]},
    }


def test_many_aliases_to_a_small_node_count_as_aliasing() -> None:
    text = "s: &s [a, b, c, d, e, f, g, h, i, j]\nl: [" + ", ".join(["*s"] * 500) + "]\n"
    with pytest.raises(BadInputError, match=r"\(top level\): excessive aliasing: 5500 of 5515 elements"):
        serialization.parse_yaml(text, source="doc.yaml")


def test_timestamps_stay_the_text_they_were_written_as() -> None:
    loaded = serialization.parse_yaml("d: 2024-01-01\nt: 2024-02-01 10:00:00\n", source="doc.yaml")
    assert loaded == {"d": "2024-01-01", "t": "2024-02-01 10:00:00"}
    assert serialization.dump_json(loaded)


def test_limits_are_per_call(tmp_path: Path) -> None:
    text = "a: [" + ", ".join(["1"] * 50) + "]\na: 2\n"
    relaxed = serialization.Limits(max_elements=60, duplicate_keys=True)
    assert serialization.parse_yaml(text, source="doc.yaml", limits=relaxed) == {"a": 2}
    with pytest.raises(BadInputError, match=r"doc\.yaml: a: expands \(aliases included\) to over 40 elements"):
        serialization.parse_yaml(
            text, source="doc.yaml", limits=serialization.Limits(max_elements=40, duplicate_keys=True)
        )
    with pytest.raises(BadInputError, match=r"doc\.yaml: larger than 10 bytes \(limit 10\)"):
        serialization.parse_yaml(text, source="doc.yaml", limits=serialization.Limits(max_bytes=10))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1, "a": 2}', r"body\.json: \(a mapping\): key 'a' appears twice"),
        ('{"a": NaN}', r"body\.json: \(a number\): NaN is not a finite number"),
        ("[1e999]", r"body\.json: \(a number\): '1e999' is not a finite number"),
        ("1" + "0" * 5000, r"body\.json: \(a number\): .* is out of range"),
        ("[" * 5000 + "]" * 5000, r"body\.json: nested (too deeply to read|deeper than 100 levels)"),
        ('{"a": [' + "[" * 100 + "]" * 100 + "]}", r"body\.json: a(\[0\])+.*: nested deeper than 100 levels"),
        ('{"a": 1', r"body\.json: not JSON"),
    ],
)
def test_json_follows_the_same_rules(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        serialization.parse_json(text, source="body.json")


def test_json_output_refuses_non_finite_numbers_naming_the_field() -> None:
    with pytest.raises(BadInputError, match=r"cannot write JSON: a\.b\[2\]: not a finite number"):
        serialization.dump_json({"a": {"b": [1, 2, float("nan")]}})


# Random documents built from the pieces that break loaders: anchors and aliases (also to
# undefined or enclosing anchors), repeated keys, non-finite and oversized numbers, YAML-only
# tags and deep nesting. Whatever comes in, the answer is a value or a BadInputError, quickly.
_ANCHORS = ["a0", "a1", "a2"]
_plain = st.sampled_from(
    [
        "1", "-2", "3.5", ".nan", "-.inf", "1e999", "99999999999999999999", "0x" + "f" * 40, "'s'", "x",
        "2024-01-01", "true", "null", "~", "!!binary aGk=", "!!set {a: null}", "<<", "1:30", "0x", "1:x", "''",
    ]
)  # fmt: skip
_tags = st.sampled_from(["", "!!int ", "!!float ", "!!bool ", "!!null ", "!!str ", "!!timestamp ", "!Ref "])
_scalars = st.tuples(_tags, _plain).map("".join)


def _laughs(level: int) -> str:
    items = [f"*l{level - 1}" if level else "lol"] * 9
    return f"l{level}: &l{level} [{', '.join(items)}]\n"


_alias = st.sampled_from(_ANCHORS).map(lambda name: f"*{name}")


def _anchored(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    sequence = st.lists(children, max_size=6).map(lambda items: "[" + ", ".join(items) + "]")
    keys = st.sampled_from(["k", "k", "j", "<<", "1", ".nan"])
    mapping = st.lists(st.tuples(keys, children), max_size=6).map(
        lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    )
    anchor = st.sampled_from(["", *(f"&{name} " for name in _ANCHORS)])
    return st.tuples(anchor, sequence | mapping).map("".join)


_yaml_documents = st.one_of(
    st.recursive(_scalars | _alias, _anchored, max_leaves=40),
    st.integers(0, 300).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(1, 12).map(
        lambda levels: "".join(
            f"l{n}: &l{n} [{', '.join([f'*l{n - 1}' if n else 'lol'] * 9)}]\n" for n in range(levels)
        )
    ),
)


@given(_yaml_documents)
def test_the_loader_answers_a_value_or_bad_input(text: str) -> None:
    """An expansion without end would hit the test's timeout; no example is timed (bench/ measures speed)."""
    try:
        value = serialization.parse_yaml(text, source="random.yaml")
    except BadInputError as exc:
        assert str(exc).startswith("random.yaml: ")
    else:
        # whatever loads is JSON-shaped: it round-trips through canonical JSON or is refused as bad input
        with contextlib.suppress(BadInputError):
            serialization.canonical_json(value)


@given(st.recursive(st.sampled_from(["1", "NaN", "-Infinity", "1e999", '"s"', "1" + "0" * 30, "null"]),
                    lambda c: st.lists(c, max_size=5).map(lambda xs: "[" + ",".join(xs) + "]")
                    | st.lists(st.tuples(st.sampled_from(["a", "a", "b"]), c), max_size=5).map(
                        lambda ps: "{" + ",".join(f'"{k}": {v}' for k, v in ps) + "}"), max_leaves=30))  # fmt: skip
def test_the_json_loader_answers_a_value_or_bad_input(text: str) -> None:
    try:
        serialization.parse_json(text, source="random.json")
    except BadInputError as exc:
        assert str(exc).startswith("random.json: ")


def test_reading_stops_at_the_size_limit() -> None:
    """`/dev/zero` never ends: the reader gives up one character past the limit."""
    with pytest.raises(BadInputError, match=r"/dev/zero: larger than 1024 bytes \(limit 1024\)"):
        documents.load_yaml_file("/dev/zero", limits=serialization.Limits(max_bytes=1024))


def test_aliases_to_one_long_string_count_its_text_each_time() -> None:
    """300 aliases to a 1 MB string would be written out 300 times (`dump_yaml` expands aliases)."""
    text = f"s: &s {'x' * 1_000_000}\nl: [" + ", ".join(["*s"] * 300) + "]\n"
    with pytest.raises(BadInputError, match=r"doc\.yaml: l: text expands \(aliases included\) past 268435456 bytes"):
        serialization.parse_yaml(text, source="doc.yaml")


def test_aliases_to_a_scalar_count_as_aliasing() -> None:
    text = "s: &s lol\nl: [" + ", ".join(["*s"] * 5000) + "]\n"
    with pytest.raises(BadInputError, match=r"excessive aliasing: 5000 of 5005 elements"):
        serialization.parse_yaml(text, source="doc.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!int abc\n", r"doc\.yaml: a: 'abc' is not a valid int"),
        ("a: [1, !!float .]\n", r"doc\.yaml: a\[1\]: '\.' is not a valid float"),
        ("a: !!bool maybe\n", r"doc\.yaml: a: 'maybe' is not a valid bool"),
        ("!!int 0x\n", r"doc\.yaml: \(top level\): '0x' is not a valid int"),
    ],
)
def test_an_explicit_tag_the_value_does_not_fit_is_bad_input(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        serialization.parse_yaml(text, source="doc.yaml")


# Documents on which libyaml's emitter and PyYAML's part ways; dump_yaml must write PyYAML's bytes.
EMITTERS_DIFFER = [
    None,
    "top-level scalar",
    {"": ""},
    {"a\nb": 1},
    ["\n", ""],
    {"k": "ends\n\n"},
    {"a" * 123: None},
    {"é" * 120: ""},
    ["\U00010000"],
    ["\ud800"],
    ["tab\there", "bell\x07", "bom\ufeff", "nel\x85"],
]


@pytest.mark.parametrize("value", EMITTERS_DIFFER, ids=repr)
def test_dump_yaml_writes_the_pure_python_bytes_where_libyaml_differs(value: object) -> None:
    assert serialization.dump_yaml(value) == serialization._dump(value, serialization._Dumper)


YAML_PUNCTUATION = list(" \n-:#?&*!|>'\"%@`,[]{}.~=<09aeE+_/\\é中\U0001f600\xa0\ufeff\t\r\x85\u2028")
emitter_text = st.one_of(
    st.text(st.sampled_from(YAML_PUNCTUATION), max_size=12),
    st.text(max_size=12),
    st.sampled_from(["", "-", "---", "...", "- a", "a: b", "#x", "null", "0755", "\n", " \n", "a\n\n", " a\n b"]),
    st.just("x" * 200),
    st.builds(lambda n, c: c * n, st.integers(30, 140), st.sampled_from(["a", "é", "a b", "中"])),
)
emitter_documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | emitter_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(emitter_text | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(emitter_documents)
def test_dump_yaml_is_byte_identical_to_the_pure_python_emitter(value: object) -> None:
    """`dump_yaml` takes libyaml's emitter when `_libyaml_writes_same` allows: the bytes must not change."""
    assert serialization.dump_yaml(value) == serialization._dump(value, serialization._Dumper)


def test_a_recipe_takes_the_libyaml_emitter() -> None:
    """libyaml's emitter is the one `dsx recipe` and `dsx bundle` take (PyYAML's wheel ships it)."""
    from dsx.model.criteria import Criteria
    from dsx.recipes import resolve

    document = resolve.resolve(Criteria().overridden_by({"service": "eks", "accelerator": "h100"})).to_dict()
    assert serialization._CDumper is not None
    assert serialization._libyaml_writes_same(document)
