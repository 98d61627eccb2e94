"""Readiness: the recipe's constraints held against the facts of a snapshot.

A constraint holds only where its fact was read on every subject it concerns; a fact that
could not be read makes the check `skipped` with the reason, and an unknown fact name is
`skipped` too — AICR counts both as passes, which hides exactly the clusters nobody measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from dsx.errors import BadInputError
from dsx.model import constraints, recipe, snapshot
from dsx.validation import facts, results

PHASE = results.Phase.READINESS


def check(target: recipe.Recipe, snap: snapshot.Snapshot) -> list[results.CheckResult]:
    return [check_constraint(c, snap) for c in target.constraints]


def check_constraint(constraint: constraints.Constraint, snap: snapshot.Snapshot) -> results.CheckResult:
    name = f"readiness/{constraint.name}"
    expression = constraint.expression()
    reading = facts.read(constraint.name, snap)
    if reading is None:
        return results.skipped(name, PHASE, f"{expression}: dsx does not measure {constraint.name}")
    failures: dict[str, str] = {}
    for subject, value in sorted(reading.values.items()):
        try:
            holds = constraint.holds(value)
        except BadInputError:
            holds = False
        if not holds:
            failures[subject] = value
    evidence = {
        "constraint": expression,
        "source": reading.source,
        "values": dict(sorted(reading.values.items())),
        "missing": dict(sorted(reading.missing.items())),
    }
    if failures:
        return results.failed(name, PHASE, f"{expression}: got {_summary(failures, reading.values)}", **evidence)
    if reading.missing:
        reasons = "; ".join(f"{s}: {r}" for s, r in sorted(reading.missing.items()))
        return results.skipped(name, PHASE, f"{expression}: cannot read {reading.source} ({reasons})", **evidence)
    return results.passed(name, PHASE, f"{expression}: got {_summary(reading.values, reading.values)}", **evidence)


def _summary(shown: Mapping[str, str], everything: Mapping[str, str]) -> str:
    """`v1.34.1`, `580.95.05 on 4 nodes`, or `570.1 on gpu-2 (1 of 4)` for a subset."""
    distinct = sorted(set(shown.values()))
    if list(shown) == [facts.CLUSTER]:
        return shown[facts.CLUSTER]
    if len(distinct) == 1 and len(shown) == len(everything):
        count = len(shown)
        return f"{distinct[0]} on {count} node{'s' if count != 1 else ''}"
    parts = [f"{value} on {', '.join(sorted(s for s, v in shown.items() if v == value))}" for value in distinct]
    return f"{'; '.join(parts)} ({len(shown)} of {len(everything)} nodes)"
