"""Area of concern: adaptive fault isolation finds exactly the bad nodes, within its run budget,
and tells a broken link from a bad node (against the simulated fabric, the Prober's fake)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from dsx.certify import engine, isolation
from dsx.testing import simulated_fabric


def _nodes(count: int) -> list[str]:
    return [f"node-{i:04d}" for i in range(count)]


def _screen(nodes: list[str]) -> list[tuple[str, ...]]:
    size = max(2, math.ceil(math.sqrt(len(nodes))))
    return [tuple(nodes[i : i + size]) for i in range(0, len(nodes), size)]


@pytest.mark.parametrize("bad", [b for k in (1, 2) for b in itertools.combinations(_nodes(8), k)])
def test_every_placement_of_one_or_two_bad_nodes_in_eight_is_found_exactly(bad: tuple[str, ...]) -> None:
    fabric = simulated_fabric.SimulatedFabric.with_faults(bad)
    outcome, _ = isolation.isolate(fabric, [tuple(_nodes(8))])
    assert sorted(outcome.faulty) == sorted(bad)
    assert not outcome.unresolved
    assert not outcome.infrastructure_faults
    assert outcome.runs == fabric.runs


@pytest.mark.parametrize(("count", "faulty"), [(64, 1), (64, 2), (256, 4), (1024, 1), (1024, 4)])
def test_runs_after_screening_stay_within_the_budget(count: int, faulty: int) -> None:
    rng = random.Random(count * 31 + faulty)
    for _ in range(5):
        bad = rng.sample(_nodes(count), faulty)
        fabric = simulated_fabric.SimulatedFabric.with_faults(bad)
        outcome, screening = isolation.isolate(fabric, _screen(_nodes(count)))
        assert sorted(outcome.faulty) == sorted(bad)
        assert outcome.runs - screening <= engine.isolation_bound(count, faulty)


def test_a_broken_link_between_two_halves_is_an_infrastructure_fault_not_a_node() -> None:
    nodes = _nodes(8)
    fabric = simulated_fabric.SimulatedFabric.with_faults([], [(nodes[:4], nodes[4:])])
    outcome, _ = isolation.isolate(fabric, [tuple(nodes)])
    assert outcome.faulty == {}
    assert [(f.group_a, f.group_b, f.whole_boundary) for f in outcome.infrastructure_faults] == [
        (tuple(nodes[:4]), tuple(nodes[4:]), True)
    ]


def test_a_bad_node_and_a_broken_rack_link_are_both_reported() -> None:
    nodes = [f"n{i:02d}" for i in range(64)]
    domains = {n: f"rack{i // 16}" for i, n in enumerate(nodes)}
    racks = [tuple(n for n in nodes if domains[n] == r) for r in sorted(set(domains.values()))]
    fabric = simulated_fabric.SimulatedFabric.with_faults(["n05"], [(racks[1], racks[2])])
    outcome, _ = isolation.isolate(fabric, [tuple(nodes)], domains=domains)
    assert list(outcome.faulty) == ["n05"]
    assert len(outcome.infrastructure_faults) == 1
    fault = outcome.infrastructure_faults[0]
    assert {fault.group_a, fault.group_b} == {racks[1], racks[2]}


def test_passing_screening_needs_no_isolation_runs() -> None:
    fabric = simulated_fabric.SimulatedFabric.with_faults([])
    outcome, screening = isolation.isolate(fabric, _screen(_nodes(64)))
    assert outcome.runs == screening == 8
    assert outcome.faulty == {}


def test_runs_of_one_round_never_share_a_node() -> None:
    # the fake raises if a node appears twice in one run; rounds are checked here
    seen: list[list[tuple[str, ...]]] = []

    class Recording(simulated_fabric.SimulatedFabric):
        def __call__(self, groups, stage):  # type: ignore[no-untyped-def]
            seen.append(list(groups))
            return super().__call__(groups, stage)

    fabric = Recording(bad_nodes=frozenset({"node-0003", "node-0040", "node-0050"}))
    isolation.isolate(fabric, _screen(_nodes(64)))
    for batch in seen:
        members = [n for g in batch for n in g]
        assert len(members) == len(set(members))


def test_with_no_healthy_reference_suspects_stay_unresolved_not_passed() -> None:
    nodes = _nodes(2)
    fabric = simulated_fabric.SimulatedFabric.with_faults(nodes)
    outcome, _ = isolation.isolate(fabric, [tuple(nodes)])
    assert set(outcome.unresolved) | set(outcome.faulty) == set(nodes)


def test_budget_formula() -> None:
    assert engine.isolation_bound(232, 1) == 1 * 8 + 2
    assert engine.isolation_bound(1024, 4) == 4 * 8 + 8
    assert engine.isolation_bound(8, 0) == 0


@pytest.mark.parametrize("count", range(2, 8))
def test_without_any_known_good_node_no_bad_node_goes_unreported_and_no_good_one_is_confirmed(count: int) -> None:
    """One failed group and nothing known good (k may reach N): every bad node ends confirmed or
    unresolved (reported failed); a node confirmed faulty is always a bad one."""
    nodes = _nodes(count)
    for faulty in range(1, count + 1):
        for bad in itertools.combinations(nodes, faulty):
            fabric = simulated_fabric.SimulatedFabric.with_faults(bad)
            outcome = isolation.Isolator(fabric).isolate([tuple(nodes)])
            assert set(bad) <= set(outcome.faulty) | set(outcome.unresolved), bad
            assert set(outcome.faulty) <= set(bad), bad
