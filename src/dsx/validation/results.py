"""Check results and the validation report they add up to.

A check is `passed`, `failed` or `skipped` — and `skipped` always carries the reason (a fact
that could not be read, a phase that needs a live cluster), so nothing unknown reads as a pass.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Phase(enum.StrEnum):
    READINESS = "readiness"
    DEPLOYMENT = "deployment"
    CONFORMANCE = "conformance"
    PERFORMANCE = "performance"


PHASE_ORDER = (Phase.READINESS, Phase.DEPLOYMENT, Phase.CONFORMANCE, Phase.PERFORMANCE)


class Status(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """One verdict: `name` is stable across runs (`<phase>/<subject>/<what>`), `evidence` is what it saw."""

    name: str
    phase: Phase
    status: Status
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "phase": self.phase.value,
            "status": self.status.value,
            "message": self.message,
            "evidence": dict(self.evidence),
        }


def passed(name: str, phase: Phase, message: str, **evidence: Any) -> CheckResult:
    return CheckResult(name, phase, Status.PASSED, message, evidence)


def failed(name: str, phase: Phase, message: str, **evidence: Any) -> CheckResult:
    return CheckResult(name, phase, Status.FAILED, message, evidence)


def skipped(name: str, phase: Phase, reason: str, **evidence: Any) -> CheckResult:
    return CheckResult(name, phase, Status.SKIPPED, reason, evidence)


@dataclass(frozen=True)
class Subject:
    """What was validated: the recipe, the snapshot (by content digest) and when the facts were read."""

    recipe_name: str
    recipe_digest: str
    snapshot_digest: str
    captured_at: str = ""


@dataclass(frozen=True)
class Report:
    """The results of one `dsx validate` run, in phase order."""

    subject: Subject
    phases: tuple[Phase, ...]
    results: tuple[CheckResult, ...]
    generator: str

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status is status)

    @property
    def failed(self) -> bool:
        return any(r.status is Status.FAILED for r in self.results)

    def phase_status(self, phase: Phase) -> Status:
        """failed if any check failed; passed if any passed; skipped when none ran."""
        statuses = {r.status for r in self.results if r.phase is phase}
        if Status.FAILED in statuses:
            return Status.FAILED
        if Status.PASSED in statuses:
            return Status.PASSED
        return Status.SKIPPED
