"""Fault-isolation cost: workload runs used to find k bad nodes among N, against alternatives.

Simulated fabric (the OR fault model): N ∈ {8, 64, 256, 1024}, k ∈ {1, 2, 4} bad nodes placed
at random (20 seeds each), screening in ⌈√N⌉-node groups as NVCRE's diagnose mode does without
topology labels. Printed per (N, k): screening runs, median and worst isolation runs after
screening, the budget k·⌈log2(N/k)⌉ + 2k, one run per node (N), and the ratio of total runs to
N. Then NVCRE's published design estimate for 232 nodes in 18-node cliques (28 tests healthy,
~22 with one bad node, ~55-57 with five) next to ours on the same layout.

Run: .venv/bin/python bench/bench_isolation.py   (or `make bench`)
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from dsx.certify import engine, isolation
from dsx.testing import simulated_fabric

SEEDS = 20


def _screen(nodes: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def _trial(count: int, faulty: int, seed: int, clique: int | None = None) -> tuple[int, int, bool]:
    rng = random.Random(seed)
    nodes = [f"node-{i:04d}" for i in range(count)]
    bad = rng.sample(nodes, faulty)
    fabric = simulated_fabric.SimulatedFabric.with_faults(bad)
    size = clique or max(2, math.ceil(math.sqrt(count)))
    domains = {n: f"clique-{i // size}" for i, n in enumerate(nodes)} if clique else None
    outcome, screening = isolation.isolate(fabric, _screen(nodes, size), domains=domains)
    exact = sorted(outcome.faulty) == sorted(bad)
    return screening, outcome.runs - screening, exact


def main() -> None:
    print("command: .venv/bin/python bench/bench_isolation.py")
    print(
        f"{'N':>5} {'k':>2} {'screen':>6} {'median':>6} {'worst':>5} {'budget':>6} {'per-node':>8} {'total/N':>7} exact"
    )
    for count in (8, 64, 256, 1024):
        for faulty in (1, 2, 4):
            results = [_trial(count, faulty, seed * 7919 + count + faulty) for seed in range(SEEDS)]
            screening = results[0][0]
            after = [r[1] for r in results]
            exact = sum(r[2] for r in results)
            total = screening + statistics.median(after)
            print(
                f"{count:>5} {faulty:>2} {screening:>6} {statistics.median(after):>6.1f} {max(after):>5} "
                f"{engine.isolation_bound(count, faulty):>6} {count:>8} {total / count:>7.3f} {exact}/{SEEDS}"
            )
    print("\nNVCRE design estimate, 232 nodes in 18-node cliques (ADR-055): healthy 28, k=1 ~22, k=5 ~55-57 tests")
    for faulty, published in ((0, "28"), (1, "~22"), (3, "-"), (5, "~55-57")):
        totals = []
        for seed in range(SEEDS):
            screening, after, _ = _trial(232, faulty, seed + 232, clique=18)
            totals.append(screening + after)
        print(
            f"  k={faulty}: dsx median {statistics.median(totals):.0f} runs (worst {max(totals)}), NVCRE {published}, "
            f"one run per node 232"
        )


if __name__ == "__main__":
    main()
