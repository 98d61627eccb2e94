"""Performance: the recipe's declared certification, run through the certification engine.

Validation does not run workloads itself. The entry point hands in a `CertificationRunner`
built on dsx.certify; without one (the engine not installed, or no way to reach the nodes) the
phase reports `skipped` with the reason, so a report never implies performance was measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dsx.errors import DsxError
from dsx.model import recipe, snapshot
from dsx.validation import results

PHASE = results.Phase.PERFORMANCE
NAME = "performance/certification"

CertificationRunner = Callable[[Mapping[str, Any], snapshot.Snapshot], Sequence[results.CheckResult]]
"""Runs a recipe's `certification:` block on the cluster; one check result per category (and group)."""


def check(
    target: recipe.Recipe,
    snap: snapshot.Snapshot,
    runner: CertificationRunner | None,
    *,
    unavailable_reason: str = "certification engine not available",
) -> list[results.CheckResult]:
    if not target.certification:
        return [results.skipped(NAME, PHASE, "the recipe declares no certification")]
    if runner is None:
        return [results.skipped(NAME, PHASE, unavailable_reason, certification=dict(target.certification))]
    try:
        return list(runner(target.certification, snap))
    except DsxError as exc:
        return [results.failed(NAME, PHASE, f"certification did not complete: {exc}")]
