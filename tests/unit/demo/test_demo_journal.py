"""Area of concern: the demo's step bookkeeping — a step passes only when it returned, failures are
kept with their message, dependants are skipped with the reason, interrupts still get recorded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dsx import errors
from dsx.demo import journal


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[journal.Journal, list[str], FakeClock]:
    lines: list[str] = []
    clock = FakeClock()
    log = journal.Journal(lines.append, clock=clock, wall_clock=lambda: datetime(2026, 1, 2, 3, 4, 5, 678000, UTC))
    return log, lines, clock


def test_a_step_that_returns_passes_with_its_detail_and_duration() -> None:
    log, lines, clock = make()

    def step() -> str:
        clock.now += 2.5
        return "did it"

    assert log.run("recipe", "recipe", step)
    (record,) = log.steps
    assert (record.status, record.detail, record.duration_seconds) == (journal.StepStatus.PASSED, "did it", 2.5)
    assert lines == ["[   2.5s] ok   recipe       did it"]
    assert log.passed


def test_dsx_errors_fail_the_step_and_the_demo_goes_on() -> None:
    log, lines, _ = make()

    def broken() -> str:
        raise errors.UnavailableError("the sentinel is not running")

    def wrong() -> str:
        raise journal.StepFailedError("expected gpu-node-05, got gpu-node-01")

    assert not log.run("sentinel", "sentinel", broken)
    assert not log.run("certify", "certify", wrong)
    assert [(s.status, s.detail) for s in log.steps] == [
        (journal.StepStatus.FAILED, "the sentinel is not running"),
        (journal.StepStatus.FAILED, "expected gpu-node-05, got gpu-node-01"),
    ]
    assert "FAIL sentinel" in lines[0]
    assert not log.passed


def test_a_bug_in_a_piece_is_reported_not_raised() -> None:
    log, _, _ = make()

    def buggy() -> str:
        raise KeyError("nodes")

    assert not log.run("validate", "validate", buggy)
    assert log.steps[0].detail == "internal error: KeyError: 'nodes'"


def test_dependants_of_a_failed_step_are_skipped_naming_it() -> None:
    log, _, _ = make()
    ran: list[str] = []

    def fail() -> str:
        raise errors.CheckFailedError("no")

    def record() -> str:
        ran.append("x")
        return "ran"

    log.run("fault", "Xid 79", fail)
    assert not log.run("quarantine", "quarantine", record, needs=["fault"])
    assert not log.run("drain", "drain", record, needs=["quarantine"])
    assert not log.run("never", "never", record, needs=["absent"])
    assert ran == []
    assert [s.detail for s in log.steps[1:]] == [
        "not run: Xid 79 did not pass",
        "not run: quarantine did not pass",
        "not run: absent did not pass",
    ]
    assert all(s.status is journal.StepStatus.SKIPPED for s in log.steps[1:])


def test_an_interrupt_is_recorded_then_propagates() -> None:
    log, _, _ = make()

    def interrupted() -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        log.run("certify", "certify", interrupted)
    assert [(s.status, s.detail) for s in log.steps] == [(journal.StepStatus.FAILED, "interrupted")]
    assert log.interrupted and not log.passed


def test_an_interrupt_between_steps_still_fails_the_run() -> None:
    log, _, _ = make()
    log.run("recipe", "recipe", lambda: "ok")
    log.interrupted = True  # what lifecycle.run records when Ctrl-C lands outside a step
    assert not log.passed


def test_notes_go_to_the_timeline_with_wall_clock_and_node() -> None:
    log, lines, clock = make()
    clock.now += 1.25
    log.note("gpu-node-02 quarantined", source="sentinel", node="gpu-node-02")
    log.note("quiet", show=False)
    first = log.timeline[0].to_dict()
    assert first == {
        "at": "2026-01-02T03:04:05.678Z",
        "elapsedSeconds": 1.25,
        "source": "sentinel",
        "message": "gpu-node-02 quarantined",
        "node": "gpu-node-02",
    }
    assert lines == ["[   1.2s]        gpu-node-02 quarantined"]
    assert "node" not in log.timeline[1].to_dict()


def test_steps_also_land_on_the_timeline() -> None:
    log, _, _ = make()
    log.run("bundle", "bundle", lambda: "21 files")
    assert log.timeline[-1].message == "bundle: passed: 21 files"


def test_no_steps_is_not_a_pass() -> None:
    log, _, _ = make()
    assert not log.passed
