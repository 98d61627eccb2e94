"""What a category is judged on, read back from the report document: metrics, bounds, runs.

The HTML report and the terminal summary both show the metric a category's thresholds test
(algorithm bandwidth for one-rank loopback, step time for training), with the bound the judge
used for each run's world size. Pure functions over the document's plain dicts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from dsx.model import certification as model

KNOWN = frozenset(m.value for m in model.Metric)
"""Metric keys this dsx knows (a report from another version may carry others)."""
_EXPRESSION = re.compile(r"^\s*value\s*(>=|>|<=|<)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\*\s*reference)?\s*$")


@dataclass(frozen=True)
class Run:
    """One measured run of a category: a screening group or an isolation probe."""

    name: str
    nodes: tuple[str, ...]
    metrics: dict[str, float]
    passed: bool
    bounds: dict[str, float] = field(default_factory=dict)


def metrics(category: dict[str, Any]) -> list[model.Metric]:
    """The metrics the category's thresholds test, in threshold order; bus bandwidth or step time without any."""
    judged = [model.Metric(t["metric"]) for t in category["thresholds"] if t["metric"] in KNOWN]
    if judged:
        return list(dict.fromkeys(judged))
    if category.get("workload") == model.WorkloadKind.TRAINING.value:
        return [model.Metric.AVG_STEP_TIME_SECONDS]
    return [model.Metric.BUS_BANDWIDTH_GBPS]


def bound(category: dict[str, Any], metric: model.Metric, run: dict[str, Any]) -> float | None:
    """The number a run (a group or a probe of the report) was held to, as the judge evaluated it
    (with that run's peers or reference); a plain `value >= X` without one; else None."""
    found = (run.get("bounds") or {}).get(metric.value)
    if isinstance(found, int | float):
        return float(found)
    for threshold in category["thresholds"]:
        if threshold["metric"] != metric.value:
            continue
        match = _EXPRESSION.match(threshold["expression"])
        return float(match[2]) if match is not None and not match[3] else None
    return None


def comparison(category: dict[str, Any], metric: model.Metric) -> str:
    """`>=` or `<=` as the threshold states it; from the metric's direction without one."""
    for threshold in category["thresholds"]:
        match = _EXPRESSION.match(threshold["expression"]) if threshold["metric"] == metric.value else None
        if match is not None:
            return match[1]
    return ">=" if metric.higher_is_better else "<="


def runs(category: dict[str, Any]) -> list[Run]:
    """Screening groups, then the isolation runs that measured something (inferred results did not run)."""
    out = [
        Run(
            g["name"], tuple(g["nodes"]), dict(g.get("metrics", {})), g["status"] == "PASSED", dict(g.get("bounds", {}))
        )
        for g in category["groups"]
    ]
    for probe in (category.get("isolation") or {}).get("tree", []):
        if probe.get("inferred") or not probe.get("metrics"):
            continue
        out.append(
            Run(
                probe.get("run", ""),
                tuple(probe["nodes"]),
                dict(probe["metrics"]),
                bool(probe["passed"]),
                dict(probe.get("bounds", {})),
            )
        )
    return out


def per_node(category: dict[str, Any], metric: model.Metric) -> dict[str, Run]:
    """For each node, the run that says most about it: agreeing with its verdict, then smallest, then latest.

    A data-parallel job steps in lock-step, so a group's per-node step times are all the slow
    node's; the isolation runs, two nodes at a time, are where the slow one stands out.
    """
    failed = set(category["failedNodes"])
    nodes = sorted({n for g in category["groups"] for n in g["nodes"]}, key=natural)
    measured = [r for r in runs(category) if metric.value in r.metrics]
    chosen: dict[str, Run] = {}
    for node in nodes:
        candidates = [(i, r) for i, r in enumerate(measured) if node in r.nodes]
        if not candidates:
            continue
        _, best = max(candidates, key=lambda c: ((c[1].passed != (node in failed)), -len(c[1].nodes), c[0]))
        chosen[node] = best
    return chosen


def worst(category: dict[str, Any], metric: model.Metric) -> float | None:
    """The worst value over the screening groups (what the summary shows next to the status)."""
    found = [g["metrics"][metric.value] for g in category["groups"] if metric.value in g.get("metrics", {})]
    values = [float(v) for v in found if isinstance(v, int | float) and math.isfinite(v)]
    if not values:
        return None
    return min(values) if metric.higher_is_better else max(values)


def world_size(document: dict[str, Any], nodes: int) -> int:
    return nodes * int(document.get("ranksPerNode") or 1)


def natural(name: str) -> tuple[Any, ...]:
    """node-2 before node-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
