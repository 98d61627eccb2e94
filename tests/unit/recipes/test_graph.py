"""Deployment order: dependencies first, ties by name, cycles and dangling edges named."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsx.errors import CatalogError
from dsx.recipes import graph


def test_dependencies_come_first_and_ties_break_by_name() -> None:
    order = graph.deployment_order(
        {"gpu-operator": ["cert-manager"], "zeta": [], "cert-manager": [], "alpha": ["gpu-operator"]}
    )
    assert order == ["cert-manager", "gpu-operator", "alpha", "zeta"]


def test_cycle_is_named() -> None:
    with pytest.raises(CatalogError, match="dependency cycle: a -> b -> c -> a"):
        graph.deployment_order({"a": ["b"], "b": ["c"], "c": ["a"], "d": []}, source="overlays x")


def test_self_dependency_is_a_cycle() -> None:
    with pytest.raises(CatalogError, match="cycle: a -> a"):
        graph.deployment_order({"a": ["a"]})


def test_missing_dependency_names_the_edge() -> None:
    with pytest.raises(CatalogError, match="gpu-operator depends on kube-prometheus-stack, which is not in the recipe"):
        graph.deployment_order({"gpu-operator": ["kube-prometheus-stack"]})


names = st.sampled_from(list("abcdefgh"))


@settings(deadline=None)
@given(st.dictionaries(names, st.lists(names, max_size=3), min_size=1))
def test_order_is_a_topological_sort_or_a_named_cycle(raw: dict[str, list[str]]) -> None:
    # keep only edges to known nodes, and only "backward" edges so the graph is acyclic
    acyclic = {n: sorted({d for d in deps if d in raw and d < n}) for n, deps in raw.items()}
    order = graph.deployment_order(acyclic)
    assert sorted(order) == sorted(acyclic)
    for name, deps in acyclic.items():
        for dep in deps:
            assert order.index(dep) < order.index(name)
    cyclic = {n: [d for d in deps if d in raw] for n, deps in raw.items()}
    if any(d >= n for n, deps in cyclic.items() for d in deps if d == n) or graph.find_cycle(cyclic):
        with pytest.raises(CatalogError, match="dependency cycle"):
            graph.deployment_order(cyclic)
