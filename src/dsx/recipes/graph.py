"""Deployment order: a topological sort of dependencyRefs with ties broken by name.

Kahn's algorithm over a min-heap keeps the order a pure function of the graph, so two runs
(and two machines) deploy in the same order. A cycle or an edge to a missing component is a
catalog error that names the cycle or the edge.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from dsx.errors import CatalogError


def deployment_order(dependencies: Mapping[str, Sequence[str]], *, source: str = "catalog") -> list[str]:
    """Every node after all of its dependencies; among ready nodes, alphabetical."""
    for name, deps in sorted(dependencies.items()):
        for dep in deps:
            if dep not in dependencies:
                raise CatalogError(f"{source}: {name} depends on {dep}, which is not in the recipe")
    waiting = {name: len(set(deps)) for name, deps in dependencies.items()}
    dependents: dict[str, list[str]] = {name: [] for name in dependencies}
    for name, deps in dependencies.items():
        for dep in set(deps):
            dependents[dep].append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for dependent in dependents[name]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) != len(dependencies):
        cycle = find_cycle({n: d for n, d in dependencies.items() if n not in order})
        raise CatalogError(f"{source}: dependency cycle: {' -> '.join(cycle)}")
    return order


def find_cycle(dependencies: Mapping[str, Sequence[str]]) -> list[str]:
    """One cycle as a closed path (`a -> b -> a`), searched from the alphabetically first node."""
    for start in sorted(dependencies):
        path: list[str] = []
        on_path: set[str] = set()
        done: set[str] = set()
        found = _walk(start, dependencies, path, on_path, done)
        if found:
            return found
    return []


def _walk(
    node: str, graph: Mapping[str, Sequence[str]], path: list[str], on_path: set[str], done: set[str]
) -> list[str]:
    path.append(node)
    on_path.add(node)
    for dep in sorted(set(graph.get(node, ()))):
        if dep in on_path:
            return [*path[path.index(dep) :], dep]
        if dep not in done and dep in graph:
            found = _walk(dep, graph, path, on_path, done)
            if found:
                return found
    path.pop()
    on_path.discard(node)
    done.add(node)
    return []
