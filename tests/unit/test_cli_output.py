from __future__ import annotations

from dsx.cli import output


def test_table_of_mappings_has_a_column_per_key() -> None:
    text = output.render([{"name": "a", "ok": True}, {"name": "b", "ok": False, "tags": ["x", "y"]}], "table")
    lines = text.splitlines()
    assert lines[0].split() == ["name", "ok", "tags"]
    assert lines[2].split() == ["a", "true"]
    assert lines[3].split() == ["b", "false", "x,", "y"]


def test_plain_lists_print_one_item_a_line() -> None:
    assert output.render(["h100", "h200"], "table") == "h100\nh200\n"
    assert output.render(True, "table") == "true\n"


def test_json_and_yaml_render_the_same_data() -> None:
    import json

    import yaml

    data = {"b": [1, 2], "a": "on"}
    assert json.loads(output.render(data, "json")) == data
    assert yaml.safe_load(output.render(data, "yaml")) == data
