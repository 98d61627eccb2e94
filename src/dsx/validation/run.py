"""One `dsx validate` run: the selected phases in order, over one snapshot and (optionally) the live cluster.

Phases run in the order readiness → deployment → conformance → performance. Every selected
phase runs even after a failure, so one report lists everything that is wrong — except
performance, which costs GPU hours and is skipped once an earlier phase has failed.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsx import serialization
from dsx.model import recipe, snapshot
from dsx.validation import conformance, deployment, performance, readiness, reading, results


def validate(
    target: recipe.Recipe,
    snap: snapshot.Snapshot,
    *,
    phases: Iterable[results.Phase],
    reader: reading.ClusterReader | None = None,
    certification: performance.Runner | None = None,
    certification_unavailable: str = "certification engine not available",
    generator: str,
) -> results.Report:
    selected = tuple(p for p in results.PHASE_ORDER if p in set(phases))
    live = reading.LiveObjects(reader) if reader is not None else None
    found: list[results.CheckResult] = []
    for phase in selected:
        if phase is results.Phase.READINESS:
            found += readiness.check(target, snap)
        elif phase is results.Phase.DEPLOYMENT:
            found += deployment.check(target, snap, live)
        elif phase is results.Phase.CONFORMANCE:
            found += conformance.check(target, snap, live)
        elif any(r.status is results.Status.FAILED for r in found):
            found.append(results.skipped(performance.NAME, phase, "skipped: an earlier phase failed"))
        else:
            found += performance.check(target, snap, certification, unavailable_reason=certification_unavailable)
    subject = results.Subject(
        recipe_name=target.metadata.name,
        recipe_digest=target.metadata.digest or target.content_digest(),
        snapshot_digest=serialization.digest(snap.to_dict()),
        captured_at=snap.captured_at,
    )
    return results.Report(subject=subject, phases=selected, results=tuple(found), generator=generator)
