"""`dsx query` paths: parsing, lookup, and errors that name the deepest existing prefix."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsx.errors import BadInputError, NotFoundError
from dsx.recipes import selector
from dsx.recipes.selector import Step

DOC = {
    "components": {
        "gpu-operator": {
            "values": {
                "driver": {"version": "580.105.08", "enabled": True},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
            }
        }
    },
    "deploymentOrder": ["cert-manager", "gpu-operator"],
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("components.gpu-operator.values.driver.version", "580.105.08"),
        (".components.gpu-operator.values.driver.enabled", True),
        ("components.gpu-operator.values.tolerations[0].key", "nvidia.com/gpu"),
        ('components.gpu-operator.values.nodeSelector["nvidia.com/gpu.present"]', "true"),
        ("deploymentOrder[-1]", "gpu-operator"),
        ("deploymentOrder", ["cert-manager", "gpu-operator"]),
        (".", DOC),
        ("", DOC),
    ],
)
def test_select(path: str, expected: Any) -> None:
    assert selector.select(DOC, path) == expected


@pytest.mark.parametrize(
    ("path", "prefix", "detail"),
    [
        ("components.gpu-operator.values.driver.verison", "components.gpu-operator.values.driver", "has keys: version"),
        ("components.network-operator.values", "components", "has keys: gpu-operator"),
        (
            "components.gpu-operator.values.tolerations[3].key",
            "components.gpu-operator.values.tolerations",
            "has 1 items",
        ),
        ("components.gpu-operator.values.driver[0]", "components.gpu-operator.values.driver", "is not a list"),
        ("deploymentOrder[0].name", "deploymentOrder[0]", "is a str, not a map"),
    ],
)
def test_missing_path_names_the_deepest_existing_prefix(path: str, prefix: str, detail: str) -> None:
    with pytest.raises(NotFoundError) as info:
        selector.select(DOC, path)
    assert f"deepest existing prefix {prefix!r}" in str(info.value)
    assert detail in str(info.value)
    assert info.value.exit_code == 3


@pytest.mark.parametrize("path", ["a..b", "a.", "a[x]", "a[0", "a.[0]", 'a["b"]c', "[0]]"])
def test_malformed_paths_are_bad_input(path: str) -> None:
    with pytest.raises(BadInputError):
        selector.parse_path(path)


def test_scalar_text() -> None:
    assert selector.scalar_text(True) == "true"
    assert selector.scalar_text(None) == "null"
    assert selector.scalar_text(3) == "3"
    assert selector.scalar_text("580.105.08") == "580.105.08"
    assert selector.scalar_text({"a": 1}) is None
    assert selector.scalar_text([1]) is None


# --- properties ------------------------------------------------------------------------------

keys = st.text(alphabet=st.characters(codec="ascii", exclude_characters="\\"), min_size=1, max_size=6)
documents = st.recursive(
    st.one_of(st.integers(), st.text(max_size=4), st.booleans(), st.none()),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=3)),
    max_leaves=15,
)


def _paths(tree: Any, prefix: list[Step]) -> list[tuple[list[Step], Any]]:
    found = [(prefix, tree)]
    if isinstance(tree, dict):
        for key, value in tree.items():
            found.extend(_paths(value, [*prefix, Step(key=key)]))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found.extend(_paths(value, [*prefix, Step(index=index)]))
    return found


@settings(deadline=None)
@given(documents)
def test_every_rendered_path_selects_its_value(document: Any) -> None:
    for steps, value in _paths(document, []):
        rendered = selector.render_path(steps)
        assert selector.parse_path(rendered) == steps
        assert selector.select(document, rendered) == value


@settings(deadline=None)
@given(st.dictionaries(keys, documents, min_size=1, max_size=3), keys)
def test_a_missing_key_reports_a_prefix_that_exists(document: dict[str, Any], missing: str) -> None:
    for steps, value in _paths(document, []):
        if isinstance(value, dict) and missing not in value:
            path = selector.render_path([*steps, Step(key=missing)])
            with pytest.raises(NotFoundError) as info:
                selector.select(document, path)
            prefix = selector.render_path(steps)
            assert f"deepest existing prefix {prefix!r}" in str(info.value)
            selector.select(document, prefix)  # the named prefix really exists
