"""The lint verdict: findings that fail it, components it could not check, and the ones it did.

A component without chart data is `not linted`: listed with the reason, never counted as
clean and never failing the run, so the reader sees exactly how much was checked.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class FindingKind(enum.StrEnum):
    UNKNOWN_KEY = "unknown-key"
    """The chart neither declares nor reads the key: Helm silently ignores it."""
    DEPRECATED_KEY = "deprecated-key"
    """The chart's comments call the key deprecated or a no-op."""
    SCHEMA_VIOLATION = "schema-violation"
    """The merged values break the chart's values.schema.json."""


@dataclass(frozen=True)
class Finding:
    component: str
    version: str
    path: str
    kind: FindingKind
    detail: str
    suggestion: str | None = None
    deprecation: str | None = None

    @property
    def message(self) -> str:
        text = f"{self.component} {self.version}: {self.path}: {self.detail}"
        if self.suggestion:
            text += f"; did you mean {self.suggestion}?"
        if self.deprecation:
            text += f" (chart comment: {self.deprecation})"
        return text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "component": self.component,
            "version": self.version,
            "path": self.path,
            "kind": self.kind.value,
            "detail": self.detail,
        }
        if self.suggestion:
            out["suggestion"] = self.suggestion
        if self.deprecation:
            out["deprecation"] = self.deprecation
        out["message"] = self.message
        return out


@dataclass(frozen=True)
class NotLinted:
    """A component (or one subchart's keys of it) the lint could not check, and why."""

    component: str
    version: str
    reason: str
    subchart: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"component": self.component, "version": self.version}
        if self.subchart:
            out["subchart"] = self.subchart
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Linted:
    """A component whose values were checked, and where the chart data came from."""

    component: str
    version: str
    origin: str
    keys_checked: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "version": self.version,
            "origin": self.origin,
            "keysChecked": self.keys_checked,
        }


@dataclass(frozen=True)
class LintReport:
    recipe: str
    findings: tuple[Finding, ...]
    not_linted: tuple[NotLinted, ...]
    linted: tuple[Linted, ...]

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        verdict = "clean" if self.ok else "FAILED"
        text = (
            f"lint {verdict}: {len(self.findings)} finding(s) in {len(self.linted)} linted component(s)"
            f"; {len(self.not_linted)} not linted"
        )
        if self.not_linted:
            text += " (not checked, not failures)"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "summary": self.summary(),
            "findings": [f.to_dict() for f in self.findings],
            "notLinted": [n.to_dict() for n in self.not_linted],
            "linted": [c.to_dict() for c in self.linted],
        }

    def text(self) -> str:
        """Human-readable form: one line per finding, then what was not linted, then the summary."""
        lines = [f"finding: {f.message}" for f in self.findings]
        for entry in self.not_linted:
            what = f"{entry.component} {entry.version}"
            if entry.subchart:
                what += f" (subchart {entry.subchart})"
            lines.append(f"not linted: {what}: {entry.reason}")
        lines.append(self.summary())
        return "\n".join(lines) + "\n"
