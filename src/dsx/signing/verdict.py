"""The answer of a verification: a trust level and the files or keys that broke it.

Four levels, no shades: `verified` (a trusted key signed exactly these bytes), `unsigned`
(contents match their checksums but nobody vouches for them), `tampered` (something does not
match; each finding names the file or key), `stale` (intact and signed, but older than the
revision or time the verifier asked for: a rollback). Only `verified` exits 0.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from dsx.errors import CheckFailedError


class TrustLevel(enum.StrEnum):
    VERIFIED = "verified"
    UNSIGNED = "unsigned"
    TAMPERED = "tampered"
    STALE = "stale"


class ArtifactKind(enum.StrEnum):
    BUNDLE = "bundle"
    FILE = "file"
    ATTESTATION = "attestation"


@dataclass(frozen=True)
class Finding:
    """One reason a target is not verified; `subject` is a relative file path or `key <id>`."""

    subject: str
    problem: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.problem}"


class TamperedError(CheckFailedError):
    """Raised inside verification when a check fails; carries the findings."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__("; ".join(str(f) for f in findings), details={"findings": [str(f) for f in findings]})
        self.findings = findings


@dataclass(frozen=True)
class Verdict:
    target: str
    kind: ArtifactKind
    level: TrustLevel
    findings: tuple[Finding, ...] = ()
    signed_by: tuple[str, ...] = ()
    files_checked: int = 0
    notes: tuple[str, ...] = field(default=())
    revision: int | None = None
    """The publisher's revision the verified signature carries (None: it carries none)."""

    @property
    def exit_code(self) -> int:
        return 0 if self.level is TrustLevel.VERIFIED else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind.value,
            "trust": self.level.value,
            "signedBy": list(self.signed_by),
            "filesChecked": self.files_checked,
            "findings": [{"subject": f.subject, "problem": f.problem} for f in self.findings],
            "notes": list(self.notes),
            **({"revision": self.revision} if self.revision is not None else {}),
        }
