"""What the demo did, in order: one record per step and a timeline of everything that happened.

A step is a function that returns a one-line detail or raises; the journal runs it, times it,
prints one progress line for it and keeps the record. A step whose prerequisites did not pass
is skipped with the reason instead of run, so one failure does not hide behind another. The
timeline collects finer events (a node changing state, a group failing) from the demo and
from the pieces it drives, with wall-clock times, for the HTML report.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsx import errors


class StepStatus(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


class StepFailedError(errors.CheckFailedError):
    """A step ran but did not do what it should; the message says what was expected and seen."""


@dataclass(frozen=True)
class StepRecord:
    name: str
    title: str
    status: StepStatus
    started_seconds: float
    """Since the demo began."""
    duration_seconds: float
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status.value,
            "startedSeconds": round(self.started_seconds, 1),
            "durationSeconds": round(self.duration_seconds, 1),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class TimelineEntry:
    at: str
    """UTC wall-clock time, ISO 8601 with milliseconds."""
    elapsed_seconds: float
    source: str
    """Who reported it: demo, sim, certify, sentinel."""
    message: str
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": self.at,
            "elapsedSeconds": round(self.elapsed_seconds, 2),
            "source": self.source,
            "message": self.message,
        }
        if self.node:
            out["node"] = self.node
        return out


STATUS_MARK = {StepStatus.PASSED: "ok  ", StepStatus.FAILED: "FAIL", StepStatus.SKIPPED: "skip"}


@dataclass
class Journal:
    """Runs steps, prints progress, keeps the records and the timeline."""

    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    steps: list[StepRecord] = field(default_factory=list)
    timeline: list[TimelineEntry] = field(default_factory=list)
    interrupted: bool = False
    """Set when Ctrl-C or SIGTERM cut the run short, wherever it landed: such a run never passes."""

    def __post_init__(self) -> None:
        self._began = self.clock()
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        return self.clock() - self._began

    def _stamp(self) -> str:
        return f"[{self.elapsed():6.1f}s]"

    def note(self, message: str, *, source: str = "demo", node: str = "", show: bool = True) -> None:
        """A timeline entry (from any thread); shown as an indented progress line unless `show` is False."""
        with self._lock:  # the sentinel's threads report here too
            now = self.wall_clock()
            at = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
            self.timeline.append(TimelineEntry(at, self.elapsed(), source, message, node))
            if show:
                self.say(f"{self._stamp()}        {message}")

    def _title(self, name: str) -> str:
        return next((s.title for s in self.steps if s.name == name), name)

    def status(self, name: str) -> StepStatus | None:
        return next((s.status for s in self.steps if s.name == name), None)

    def run(self, name: str, title: str, step: Callable[[], str], *, needs: Iterable[str] = ()) -> bool:
        """Run one step unless a prerequisite did not pass; True when it passed.

        DsxError and StepFailedError mark the step failed and the demo goes on; an interrupt
        (Ctrl-C, SIGTERM) marks it failed and propagates so the caller can clean up.
        """
        missing = [self._title(n) for n in needs if self.status(n) is not StepStatus.PASSED]
        started = self.elapsed()
        if missing:
            self._record(name, title, StepStatus.SKIPPED, started, f"not run: {', '.join(missing)} did not pass")
            return False
        try:
            detail = step()
        except errors.DsxError as exc:
            self._record(name, title, StepStatus.FAILED, started, str(exc))
            return False
        except KeyboardInterrupt:
            self.interrupted = True
            self._record(name, title, StepStatus.FAILED, started, "interrupted")
            raise
        except Exception as exc:  # a bug in a piece: reported as the step's failure, the demo goes on to clean up
            self._record(name, title, StepStatus.FAILED, started, f"internal error: {type(exc).__name__}: {exc}")
            return False
        self._record(name, title, StepStatus.PASSED, started, detail)
        return True

    def _record(self, name: str, title: str, status: StepStatus, started: float, detail: str) -> None:
        record = StepRecord(name, title, status, started, self.elapsed() - started, detail)
        self.steps.append(record)
        self.say(f"{self._stamp()} {STATUS_MARK[status]} {title:<12} {detail}")
        self.note(f"{title}: {status.value}: {detail}", show=False)

    @property
    def passed(self) -> bool:
        return not self.interrupted and bool(self.steps) and all(s.status is StepStatus.PASSED for s in self.steps)
