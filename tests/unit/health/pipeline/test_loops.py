"""Area of concern: the sentinel's background loops survive any exception — not only dsx errors —
log its traceback once (repeats quietly), count it in `dsx_sentinel_loop_errors_total`, show the
loop as failing in `/readyz` and `dsx_sentinel_loop_failing` until a round succeeds again."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from dsx.controllers import loops, telemetry
from dsx.controllers.sentinel import SentinelOptions, SentinelRuntime
from dsx.health.decisions import policy
from dsx.pipeline import stages


class Breaks:
    """A stage runner whose first rounds raise a KeyError (a bug, not a DsxError), then go idle."""

    name = "quarantine"
    enabled = True

    def __init__(self, failures: int, stop: threading.Event) -> None:
        self.failures, self.rounds, self.stop = failures, 0, stop

    def step(self) -> int:
        self.rounds += 1
        if self.rounds <= self.failures:
            raise KeyError("metadata")
        self.stop.set()
        return 0

    def idle_seconds(self, default: float) -> float:
        return 0.0


def runtime_parts() -> SentinelRuntime:
    """The parts of a runtime the loops use (no cluster, no store)."""
    runtime = SentinelRuntime.__new__(SentinelRuntime)
    runtime.telemetry = telemetry.SentinelTelemetry()
    runtime.loops = loops.LoopHealth(runtime.telemetry)
    runtime.stop_event = threading.Event()
    runtime.waker = stages.Waker()
    runtime.options = SentinelOptions(policy=policy.SentinelPolicy(), store_url="memory:")
    return runtime


def sample(runtime: SentinelRuntime, name: str, loop: str) -> float | None:
    return runtime.telemetry.registry.get_sample_value(name, {"loop": loop})


def test_a_stage_loop_survives_any_exception_and_logs_its_traceback_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = runtime_parts()
    monkeypatch.setattr(runtime.stop_event, "wait", lambda timeout=None: False)  # no back-off sleeps in a test
    runner = Breaks(3, runtime.stop_event)
    with caplog.at_level(logging.DEBUG, logger="dsx.sentinel"):
        runtime._stage_loop(runner)()  # type: ignore[arg-type]
    assert runner.rounds == 4  # three failures, then a good round: the loop lived on
    assert sum(1 for r in caplog.records if r.exc_info) == 1
    assert "KeyError" in caplog.text and "recovered after 3 failed rounds" in caplog.text
    assert sample(runtime, "dsx_sentinel_loop_errors_total", "stage quarantine") == 3
    assert sample(runtime, "dsx_sentinel_loop_failing", "stage quarantine") == 0
    assert runtime.loops.failing() == {}


def test_a_failing_loop_shows_in_readyz_until_it_recovers() -> None:
    runtime = runtime_parts()
    runtime._started, runtime._threads = True, []
    runtime.store = type("Store", (), {"last_sequence": lambda self: 0})()
    runtime.client = type("Client", (), {"ready": lambda self: True})()
    runtime._refresh_readiness()  # what the readiness loop does every 2 s
    assert runtime.ready() is None
    runtime.loops.failed("node watch", ValueError("no such field: spec"))
    assert runtime.ready() == "failing: node watch: ValueError: no such field: spec"
    assert sample(runtime, "dsx_sentinel_loop_failing", "node watch") == 1
    runtime.loops.ok("node watch")
    assert runtime.ready() is None


def test_readyz_answers_from_the_last_check_and_says_when_it_is_late() -> None:
    """Issue 28: a hung apiserver or store never holds a probe; a check that does not come back is the reason."""
    runtime = runtime_parts()
    runtime._started, runtime._threads = True, []

    class Hanging:
        def last_sequence(self) -> int:
            raise AssertionError("a probe must not wait on the store")

    runtime.store = Hanging()  # type: ignore[assignment]
    runtime._dependencies = (None, time.monotonic())
    started = time.monotonic()
    assert runtime.ready() is None
    assert time.monotonic() - started < 0.1
    runtime._dependencies = (None, time.monotonic() - 30)  # the readiness loop is stuck in a call
    assert runtime.ready() == "the event store or the Kubernetes API has not answered for 30 s"
    runtime._dependencies = ("event store: unreachable", time.monotonic())
    assert runtime.ready() == "event store: unreachable"
