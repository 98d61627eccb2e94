"""Area of concern: the pipeline over every store gives the clean run's result when a step is retried
after a failure at any point — a store call (append, claim, begin, ack, transition, finish) or a
node write, failing before or after its effect — and poison input ends well: a stage handler
that keeps raising is retried `max_attempts` times, logged with its traceback once, parked as a
dead letter that `status` lists and `retry` replays. Regressions of issue 13 (items 2, 3, 5)."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dsx.errors import DsxError, UnavailableError
from dsx.health.decisions import analyzer, dead_letters, nodes, pipeline_status
from dsx.health.decisions.eventstore import EventStore, StageOutcome, StageStatus, StoredEvent, ValidationStatus
from dsx.health.decisions.policy import PIPELINE, DeadLetterSettings, Stage
from dsx.health.decisions.validation_requests import ValidationKind, reason
from dsx.pipeline import analyzer_stage, stages
from dsx.pipeline.validations import ValidationRunner
from dsx.testing.inmemory import InMemoryEventStore
from dsx.testing.inmemory_nodes import InMemoryNodeOps
from unit.health.pipeline.builders import Clock as PipelineClock
from unit.health.pipeline.builders import FakeRecertifier, Pipeline, RecordingObserver, cluster, policy_with, xid

from .conftest import Backend, FakeClock

CERTIFIED = "sentinel.dsx.run/certified"
HELD = "sentinel.dsx.run/not-yet-certified"


class Flaky:
    """Wraps any object; the `on_call`-th call of a chosen method fails once, before or after its effect."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._plan: dict[str, tuple[int, str]] = {}
        self.calls: Counter[str] = Counter()
        self.injected: list[str] = []

    def fail(self, method: str, *, on_call: int = 1, when: str = "before") -> None:
        self._plan[method] = (on_call, when)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._plan or not callable(attr):
            return attr

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            on_call, when = self._plan[name]
            if self.calls[name] != on_call:
                return attr(*args, **kwargs)
            self.injected.append(name)
            if when == "after":
                attr(*args, **kwargs)
            raise UnavailableError(f"{name}: database is locked (injected, {when} the effect)")

        return wrapped


def retried(step: Callable[[], int], rounds: int = 20) -> None:
    """What a sentinel loop does: step, and on an error step again."""
    for _ in range(rounds):
        try:
            if step() == 0:
                return
        except DsxError:
            continue


# -- the analyzer ----------------------------------------------------------------------------------


def bursts(make_event: Callable[..., Any], count: int) -> list[Any]:
    return [make_event(i, minutes=i) for i in range(count)]


def analyzed(store: EventStore) -> tuple[list[str], list[tuple[int, str]], int]:
    derived = sorted(s.event.idempotency_key for s in store.events() if s.event.agent == analyzer.AGENT)
    records = [(s.sequence, r.status.value) for s in store.events() for r in store.stage_records(s.sequence)]
    return derived, records, store.cursor(analyzer_stage.CONSUMER)


def run_analyzer(store: EventStore, events: list[Any]) -> None:
    getattr(store, "_inner", store).append(events)  # the monitor's append is not under test
    stage = analyzer_stage.AnalyzerStage(store, analyzer.Analyzer(analyzer.shipped_rules()), owner="t")  # type: ignore[arg-type]
    retried(stage.step)


def test_three_xid_bursts_and_a_failed_ack_do_not_escalate(backend: Backend, make_event: Callable[..., Any]) -> None:
    """Reproduction 2: the rule needs five; a retried batch must not be counted twice."""
    flaky = Flaky(backend.open())
    flaky.fail("ack")
    run_analyzer(flaky, bursts(make_event, 3))  # type: ignore[arg-type]
    assert flaky.injected == ["ack"]
    derived, _, cursor = analyzed(flaky)  # type: ignore[arg-type]
    assert derived == []
    assert cursor == 3


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("method", ["claim", "append", "ack"])
def test_the_analyzer_retried_after_a_store_failure_matches_the_clean_run(
    backend: Backend, make_event: Callable[..., Any], method: str, when: str
) -> None:
    clean = InMemoryEventStore(clock=FakeClock())
    run_analyzer(clean, bursts(make_event, 7))
    flaky = Flaky(backend.open())
    flaky.fail(method, when=when)
    run_analyzer(flaky, bursts(make_event, 7))  # type: ignore[arg-type]
    assert flaky.injected == [method]
    assert analyzed(flaky) == analyzed(clean)  # type: ignore[arg-type]
    assert len(analyzed(clean)[0]) == 1  # five of seven fired once; two wait in the window


# -- the stages ------------------------------------------------------------------------------------

POINTS = [
    ("store", "begin"),
    ("store", "ack"),
    ("store", "transition"),
    ("store", "append"),
    ("store", "request_validation"),
    ("store", "start_validations"),
    ("store", "finish_validation"),
    ("nodes", "change_node"),
]


def pipeline_result(pipeline: Pipeline, fleet: InMemoryNodeOps) -> dict[str, Any]:
    store = pipeline.store
    node = fleet.get_node("n3")
    return {
        "history": [(m.from_state.value, m.to_state.value) for m in store.node_history("n3")],
        "records": sorted(
            (r.stage, r.sequence, r.status.value) for s in store.events() for r in store.stage_records(s.sequence)
        ),
        "validations": [(r.node_name, r.status.value) for r in store.validation_requests()],
        "cursors": store.cursors(),
        "unschedulable": nodes.unschedulable(node),
        "taints": nodes.taints(node),
        "labels": {k: v for k, v in nodes.labels_of(node).items() if k.startswith("sentinel.")},
        "remediations": [r.kind.value for r in pipeline.provider.requests],
    }


def run_pipeline(store: Any, fleet: Any, clock: PipelineClock) -> Pipeline:
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, RecordingObserver())
    getattr(store, "_inner", store).append([xid("n3")])  # the monitor's append is not under test
    idle = 0
    for _ in range(40):  # what the sentinel's loops do: step, and on an error step again
        try:
            moved = sum(r.step() for r in pipeline.runners) + pipeline.validations.step()
        except DsxError:
            moved = 1
        idle = 0 if moved else idle + 1
        if idle == 3:
            break
    return pipeline


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize(("where", "method"), POINTS)
def test_every_stage_retried_after_a_failure_matches_the_clean_run(
    backend: Backend, where: str, method: str, when: str
) -> None:
    clean_fleet = cluster()
    clean = run_pipeline(InMemoryEventStore(clock=PipelineClock()), clean_fleet, PipelineClock())
    expected = pipeline_result(clean, clean_fleet)
    assert expected["history"][-1] == ("recertifying", "healthy")

    flaky_store, flaky_fleet = Flaky(backend.open()), Flaky(cluster())
    (flaky_store if where == "store" else flaky_fleet).fail(method, when=when)
    flaky = run_pipeline(flaky_store, flaky_fleet, PipelineClock())
    assert [*flaky_store.injected, *flaky_fleet.injected] == [method]
    assert pipeline_result(flaky, flaky_fleet._inner) == expected


# -- the validation runner -------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_node_write_after_a_passed_validation_is_retried_not_lost(
    backend: Backend, caplog: pytest.LogCaptureFixture, when: str
) -> None:
    """Reproduction 3: the store must not say `passed` while the node is still held (worker threads as live)."""
    store = backend.open()
    fleet = Flaky(cluster(["n1", "n2"]))
    fleet.change_node("n1", dataclasses.replace(_hold()))  # held, as a joining node is
    fleet.fail("change_node", on_call=2, when=when)  # 1: the "running" mark, 2: the release
    runner = ValidationRunner(
        store, fleet, policy_with(Stage.VALIDATION), FakeRecertifier(), RecordingObserver(), workers=1
    )  # type: ignore[arg-type]
    store.request_validation("n1", reason(ValidationKind.JOINED, "joined the cluster"))
    with caplog.at_level(logging.WARNING, logger="dsx.sentinel"):
        for _ in range(50):
            runner.step()
            _wait_idle(runner)
            if store.validation_requests(ValidationStatus.PASSED):
                break
    runner.close()
    assert fleet.injected == ["change_node"]
    node = fleet.get_node("n1")
    assert [r.status for r in store.validation_requests()] == [ValidationStatus.PASSED]
    assert not nodes.has_taint(node, HELD)
    assert nodes.labels_of(node)[CERTIFIED] == "true"
    assert sum(1 for r in caplog.records if r.exc_info) == 1  # logged once, with its traceback


@pytest.mark.parametrize("method", ["start_validations", "finish_validation"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_start_or_finish_is_retried_without_certifying_again(backend: Backend, method: str, when: str) -> None:
    store = Flaky(backend.open())
    store.fail(method, when=when)
    certifier = FakeRecertifier()
    runner = ValidationRunner(
        store, cluster(["n1"]), policy_with(Stage.VALIDATION), certifier, RecordingObserver(), workers=1
    )  # type: ignore[arg-type]
    store.request_validation("n1", reason(ValidationKind.MANUAL, "asked"))
    for _ in range(50):
        try:
            runner.step()
        except DsxError:
            continue
        _wait_idle(runner)
        if store.validation_requests(ValidationStatus.PASSED):
            break
    runner.close()
    assert store.injected == [method]
    assert [r.status for r in store.validation_requests()] == [ValidationStatus.PASSED]
    assert len(certifier.requests) == 1


def _hold() -> Any:
    from dsx.health.decisions.ports import NodeChange, Taint

    return NodeChange(add_taints=(Taint(HELD),))


def _wait_idle(runner: ValidationRunner) -> None:
    import time

    deadline = time.monotonic() + 10
    while runner.running and time.monotonic() < deadline:
        time.sleep(0.005)


# -- poison input ----------------------------------------------------------------------------------


class Poisoned:
    """A stage handler that raises ValueError on a batch holding a poison event, until cured."""

    upstream: str | None = None
    retry_seconds = 0.0

    def __init__(self, *poison: int, name: str = "poisoned") -> None:
        self.name = name
        self.poison = set(poison)
        self.cured = False
        self.calls: Counter[str] = Counter()

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        self.calls[node_name] += 1
        bad = [e.sequence for e in events if e.sequence in self.poison]
        if bad and not self.cured:
            raise ValueError(f"cannot parse the reason of event {bad[0]}")
        return [StageOutcome(e.sequence, StageStatus.DONE, {"node": node_name}) for e in events]


class Ticks:
    """A monotonic clock that jumps a minute per reading: leases renew and look-ups are due every step."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 60.0
        return self.now


def test_a_handler_raising_is_retried_n_times_then_dead_lettered_listed_and_replayed(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = backend.open()
    store.append([xid("bad"), xid("good", "48"), xid("bad", "48", at=timedelta(minutes=1))])
    handler = Poisoned(1)
    runner = stages.StageRunner(
        store, handler, owner="t", workers=0, clock=Ticks(), dead_letter=DeadLetterSettings(max_attempts=3)
    )
    with caplog.at_level(logging.WARNING, logger="dsx.sentinel"):
        for _ in range(10):
            runner.step()

    assert handler.calls["bad"] == 4  # the poison event three times (alone after the first), then its successor
    record = store.stage_record("poisoned", 1)
    assert record is not None and record.status is StageStatus.DEAD_LETTER
    assert record.detail["attempts"] == 3 and "ValueError" in record.detail["error"]
    assert [(s, r.status) for s in (2, 3) if (r := store.stage_record("poisoned", s))] == [
        (2, StageStatus.DONE),
        (3, StageStatus.DONE),
    ]
    assert store.cursor("poisoned") == 3  # the pipeline moved on
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "ValueError" in caplog.text

    listed = pipeline_status.document(store, None, now=datetime.now(UTC))["deadLetters"]
    assert [(d["stage"], d["sequence"], d["node"], d["attempts"]) for d in listed] == [("poisoned", 1, "bad", 3)]

    handler.cured = True
    assert dead_letters.retry(store, ["poisoned"]) == [("poisoned", 1)]
    assert store.stage_record("poisoned", 1) is None  # open again
    for _ in range(5):
        runner.step()
    record = store.stage_record("poisoned", 1)
    assert record is not None and record.status is StageStatus.DONE
    assert pipeline_status.document(store, None, now=datetime.now(UTC))["deadLetters"] == []
    assert store.cursor("poisoned") == 3


def test_a_replayed_dead_letter_goes_through_the_later_stages_again(backend: Backend) -> None:
    store = backend.open()
    store.append([xid("bad")])
    first, second = Poisoned(1), Poisoned(name="second")
    second.upstream = "poisoned"
    settings = DeadLetterSettings(max_attempts=1)
    runners = [
        stages.StageRunner(store, h, owner="t", workers=0, clock=Ticks(), dead_letter=settings) for h in (first, second)
    ]
    for _ in range(4):
        for runner in runners:
            runner.step()
    assert second.calls["bad"] == 1  # the later stage went on past the dead letter
    first.cured = True
    assert dead_letters.retry(store, ["poisoned", "second"]) == [("poisoned", 1)]
    runners[1].step()
    assert second.calls["bad"] == 1  # waits until the first stage has handled it again
    for _ in range(4):
        for runner in runners:
            runner.step()
    assert second.calls["bad"] == 2
    assert [r.status for r in store.stage_records(1)] == [StageStatus.DONE, StageStatus.DONE]
