"""Performance: the recipe's declared certification, run through the certification engine.

Validation neither runs workloads nor imports dsx.certify. The entry point (the CLI, the
composition root) builds a `CertificationRunner` around a `certify` callable that runs the
engine with an executor able to reach the nodes — Kubernetes Jobs on the cluster's GPU nodes,
or local processes standing in for the snapshot's GPU nodes — and this module judges what the
engine found: one check per category, naming each failed node with the engine's reason, and
one for nodes the engine could not certify. The outcome is read through the small protocols
below, so any engine result with those fields will do. Without a runner (no cluster to reach)
the phase reports `skipped` with the reason, so a report never implies performance was measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dsx.errors import DsxError
from dsx.model import certification as certification_model
from dsx.model import recipe, snapshot
from dsx.validation import results

PHASE = results.Phase.PERFORMANCE
NAME = "performance/certification"
ELIGIBILITY = "performance/eligibility"
LOCAL_NODE_CAP = 8
"""The most snapshot GPU nodes a local run stands in for: each is a process group on this machine."""

Runner = Callable[[Mapping[str, Any], snapshot.Snapshot], Sequence[results.CheckResult]]
"""What the phase calls with the recipe's `certification:` block: check results, one per category."""


class AppliedThreshold(Protocol):
    @property
    def expression(self) -> str: ...


class CategoryOutcome(Protocol):
    """One certified category as the engine reports it."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> certification_model.Status: ...

    @property
    def applied(self) -> Mapping[certification_model.Metric, AppliedThreshold]: ...

    @property
    def node_verdicts(self) -> Mapping[str, certification_model.NodeVerdict]: ...


class CertificationOutcome(Protocol):
    """What validation reads of a finished certification (dsx.certify's `CertificationResult` fits)."""

    @property
    def executor(self) -> str: ...

    @property
    def excluded(self) -> Mapping[str, certification_model.ExclusionCause]: ...

    @property
    def categories(self) -> Sequence[CategoryOutcome]: ...


Certify = Callable[[Mapping[str, Any], snapshot.Snapshot], CertificationOutcome]
"""Runs a `certification:` block through the engine on the nodes the entry point can reach."""


@dataclass(frozen=True)
class CertificationRunner:
    """The phase's runner: certify through the engine handed in, then judge the outcome as checks."""

    certify: Certify

    def __call__(self, block: Mapping[str, Any], snap: snapshot.Snapshot) -> list[results.CheckResult]:
        return judge(self.certify(block, snap))


def check(
    target: recipe.Recipe,
    snap: snapshot.Snapshot,
    runner: Runner | None,
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


def judge(outcome: CertificationOutcome) -> list[results.CheckResult]:
    """One check per category (failed nodes named with reason and evidence), plus excluded nodes."""
    out = [_category_check(category, outcome.executor) for category in outcome.categories]
    if outcome.excluded:
        excluded = {name: cause.value for name, cause in sorted(outcome.excluded.items())}
        listed = ", ".join(f"{name} ({cause})" for name, cause in excluded.items())
        out.append(
            results.failed(
                ELIGIBILITY,
                PHASE,
                f"{len(excluded)} node(s) not certified: {listed}",
                executor=outcome.executor,
                excluded=excluded,
            )
        )
    return out


def _category_check(category: CategoryOutcome, executor: str) -> results.CheckResult:
    name = f"performance/{category.name}"
    verdicts = dict(sorted(category.node_verdicts.items()))
    evidence: dict[str, Any] = {
        "executor": executor,
        "nodes": list(verdicts),
        "thresholds": {metric.value: applied.expression for metric, applied in sorted(category.applied.items())},
    }
    failed = {n: v for n, v in verdicts.items() if v.status is certification_model.Status.FAILED}
    if category.status is not certification_model.Status.FAILED:
        return results.passed(
            name, PHASE, f"{category.name}: {len(verdicts)} node(s) passed ({executor} executor)", **evidence
        )
    if not failed:
        return results.failed(
            name,
            PHASE,
            f"{category.name}: a group run failed but no single node is to blame (a link or the fabric)",
            **evidence,
        )
    evidence["failedNodes"] = {n: v.failure.to_dict() if v.failure else {} for n, v in failed.items()}
    reasons = "; ".join(f"{n}: {_reason(v)}" for n, v in failed.items())
    return results.failed(
        name, PHASE, f"{category.name}: {len(failed)} of {len(verdicts)} node(s) failed: {reasons}", **evidence
    )


def _reason(verdict: certification_model.NodeVerdict) -> str:
    failure = verdict.failure
    if failure is None:
        return "failed"
    return f"{failure.reason.value} ({failure.message})" if failure.message else failure.reason.value


def local_stand_ins(
    target: certification_model.Target, snap: snapshot.Snapshot, *, cap: int = LOCAL_NODE_CAP
) -> list[str]:
    """The snapshot's GPU nodes a local run stands in for: those the certification targets, at most `cap`."""
    chosen = [
        node.name
        for node in snap.gpu_nodes
        if target.selects(certification_model.CandidateNode(node.name, labels=dict(node.labels)))
    ]
    limit = min(cap, target.node_count) if target.node_count else cap
    return chosen[:limit]
