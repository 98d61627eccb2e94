"""Values merge: later layers win, maps merge recursively, lists and scalars replace whole."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsx.recipes import merge

keys = st.sampled_from(["a", "b", "c", "driver", "version", "x.y"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
trees = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=4)),
    max_leaves=12,
)
maps = st.dictionaries(keys, trees, max_size=4)


def _leaves(tree: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Map paths to non-map values; an empty map has no leaves (merging it changes nothing)."""
    if isinstance(tree, dict):
        out: dict[tuple[str, ...], Any] = {}
        for key, value in tree.items():
            out.update(_leaves(value, (*prefix, key)))
        return out
    return {prefix: tree}


def test_example_from_the_catalog_readme() -> None:
    base = {"driver": {"version": "580", "rdma": {"enabled": False}}, "tolerations": [{"key": "a"}]}
    layer = {"driver": {"rdma": {"enabled": True}}, "tolerations": [{"key": "b"}], "cdi": None}
    assert merge.deep_merge(base, layer) == {
        "driver": {"version": "580", "rdma": {"enabled": True}},
        "tolerations": [{"key": "b"}],
        "cdi": None,
    }


@settings(deadline=None)
@given(maps, maps)
def test_every_leaf_of_the_later_layer_wins(base: dict[str, Any], layer: dict[str, Any]) -> None:
    merged = merge.deep_merge(base, layer)
    merged_leaves = _leaves(merged)
    for path, value in _leaves(layer).items():
        if path:
            assert merged_leaves[path] == value


@settings(deadline=None)
@given(maps, maps)
def test_base_leaves_survive_unless_the_layer_replaces_them(base: dict[str, Any], layer: dict[str, Any]) -> None:
    merged_leaves = _leaves(merge.deep_merge(base, layer))
    for path, value in _leaves(base).items():
        if not _replaced(layer, path):
            assert merged_leaves[path] == value


def _replaced(layer: dict[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the layer sets something at `path` or a non-map at one of its prefixes."""
    node: Any = layer
    for depth, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
        if depth == len(path) - 1 or not isinstance(node, dict):
            return True
    return False


@settings(deadline=None)
@given(maps, maps, maps)
def test_layers_apply_in_order_and_a_map_replacing_a_scalar_starts_fresh(
    a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]
) -> None:
    # overlays fold left: merging b then c equals merging c's leaves into (a then b)
    folded = merge.deep_merge(merge.deep_merge(a, b), c)
    step = merge.deep_merge(a, b)
    merge.merge_into(step, c)
    assert folded == step
    assert merge.deep_merge({"k": 1}, {"k": {"x": 2}}) == {"k": {"x": 2}}
    assert merge.deep_merge({"k": {"x": 2}}, {"k": 1}) == {"k": 1}


@settings(deadline=None)
@given(maps)
def test_merge_with_itself_or_empty_changes_nothing(a: dict[str, Any]) -> None:
    assert merge.deep_merge(a, a) == a
    assert merge.deep_merge(a, {}) == a
    assert merge.deep_merge({}, a) == a


@settings(deadline=None)
@given(maps, maps)
def test_inputs_are_untouched_and_result_shares_no_containers(base: dict[str, Any], layer: dict[str, Any]) -> None:
    base_before, layer_before = copy.deepcopy(base), copy.deepcopy(layer)
    merged = merge.deep_merge(base, layer)
    assert base == base_before
    assert layer == layer_before
    ids = {id(x) for x in _containers(base) + _containers(layer)}
    assert not ids & {id(x) for x in _containers(merged)}


def _containers(tree: Any) -> list[Any]:
    if isinstance(tree, dict):
        return [tree, *(c for v in tree.values() for c in _containers(v))]
    if isinstance(tree, list):
        return [tree, *(c for v in tree for c in _containers(v))]
    return []


def test_union_keeps_first_seen_order() -> None:
    assert merge.union_in_order(["a", "b"], ["c", "a", "d"]) == ["a", "b", "c", "d"]
