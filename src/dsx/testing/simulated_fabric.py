"""A fault model standing in for real workload runs, for isolation tests and the benchmark.

Implements `isolation.Prober`: a group fails when it contains a bad node, or when it holds
nodes from both sides of a broken link (the OR model that group testing assumes). Every call
is counted, so a test or benchmark can compare runs used against a budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dsx.certify.isolation import ProbeVerdict, Stage


@dataclass
class SimulatedFabric:
    bad_nodes: frozenset[str] = frozenset()
    broken_links: tuple[tuple[frozenset[str], frozenset[str]], ...] = ()
    runs: int = 0
    rounds: int = 0
    runs_by_stage: dict[Stage, int] = field(default_factory=dict)

    @classmethod
    def with_faults(
        cls, bad_nodes: Iterable[str] = (), broken_links: Iterable[tuple[Iterable[str], Iterable[str]]] = ()
    ) -> SimulatedFabric:
        return cls(
            bad_nodes=frozenset(bad_nodes),
            broken_links=tuple((frozenset(a), frozenset(b)) for a, b in broken_links),
        )

    def fails(self, group: Iterable[str]) -> bool:
        members = set(group)
        if members & self.bad_nodes:
            return True
        return any(members & a and members & b for a, b in self.broken_links)

    def __call__(self, groups: Sequence[tuple[str, ...]], stage: Stage) -> list[ProbeVerdict]:
        self.rounds += 1
        self.runs += len(groups)
        self.runs_by_stage[stage] = self.runs_by_stage.get(stage, 0) + len(groups)
        verdicts = []
        for group in groups:
            if len(set(group)) != len(group):
                raise AssertionError(f"a node appears twice in one run: {group}")
            culprits = sorted(set(group) & self.bad_nodes)
            verdicts.append(ProbeVerdict(passed=not self.fails(group), detail=culprits or None))
        return verdicts
