"""Area of concern: the analyzer's windowed rules (the shipped catalog and hand-written ones) fire
exactly at their thresholds within their windows, per group, deterministically; malformed rule
files are refused with the file, rule and field named; as a store consumer it derives each
escalation once even when it crashes between append and ack."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dsx.errors import BadInputError
from dsx.health.decisions import analyzer
from dsx.health.decisions.analyzer import Analyzer
from dsx.health.decisions.eventstore import StageStatus
from dsx.model.health import (
    NODE_REMEDIATED_CHECK,
    ComponentClass,
    Entity,
    EntityType,
    HealthEvent,
    ProcessingStrategy,
    RecommendedAction,
)
from dsx.pipeline.analyzer_stage import AnalyzerStage
from dsx.testing.inmemory import InMemoryEventStore

T0 = datetime(2026, 11, 29, tzinfo=UTC)
HOUR = timedelta(hours=1)


def xid_event(
    code: str = "79",
    *,
    at: timedelta = timedelta(0),
    node: str = "n1",
    pci: str = "0000:3b:00.0",
    bucket: str = "RESTART_BM",
    **changes: Any,
) -> HealthEvent:
    fields: dict[str, Any] = {
        "agent": "kernel-log-monitor",
        "component_class": ComponentClass.GPU,
        "check_name": "KernelLogXid",
        "node_name": node,
        "generated_at": T0 + at,
        "is_fatal": bucket not in ("RESTART_APP", "IGNORE"),
        "is_healthy": False,
        "message": f"NVRM: Xid (PCI:{pci}): {code}",
        "recommended_action": RecommendedAction.NONE,
        "error_codes": (code,),
        "entities": (Entity(EntityType.PCI, pci),),
        "metadata": {"immediate_action": bucket, "at": str(at)},
    }
    fields.update(changes)
    return HealthEvent(**fields)


@pytest.fixture(scope="module")
def shipped() -> list[analyzer.AnalyzerRule]:
    return analyzer.shipped_rules()


def fired(rules: list[analyzer.AnalyzerRule], events: list[HealthEvent]) -> list[HealthEvent]:
    engine = Analyzer(rules)
    return [derived for event in events for derived in engine.observe(event)]


def test_the_same_xid_five_times_on_one_gpu_in_a_day_calls_support(shipped: list[analyzer.AnalyzerRule]) -> None:
    events = [xid_event(at=i * 4 * HOUR) for i in range(5)]
    (escalation,) = fired(shipped, events)
    assert (escalation.check_name, escalation.recommended_action, escalation.is_fatal) == (
        "RepeatedXidOnSameGpu",
        RecommendedAction.CONTACT_SUPPORT,
        True,
    )
    assert escalation.agent == "health-events-analyzer"
    assert (escalation.node_name, escalation.generated_at, escalation.entities) == (
        "n1",
        events[-1].generated_at,
        events[-1].entities,
    )
    assert escalation.error_codes == ("79",)
    assert escalation.metadata["trigger"] == events[-1].idempotency_key
    assert escalation.metadata["group"] == "node=n1, agent=kernel-log-monitor, gpu=0000:3b:00.0, error_code=79"
    assert "(5 within 1 d;" in escalation.message


def test_four_is_not_enough_and_the_window_slides(shipped: list[analyzer.AnalyzerRule]) -> None:
    assert fired(shipped, [xid_event(at=i * HOUR) for i in range(4)]) == []
    spread = [xid_event(at=i * 7 * HOUR) for i in range(5)]  # first and fifth are 28 h apart
    assert fired(shipped, spread) == []
    assert len(fired(shipped, [*spread, xid_event(at=29 * HOUR)])) == 1


def test_groups_are_per_gpu_per_code_and_per_node(shipped: list[analyzer.AnalyzerRule]) -> None:
    mixed = [
        *(xid_event(at=i * HOUR, pci="0000:3b:00.0") for i in range(3)),
        *(xid_event(at=i * HOUR, pci="0000:3c:00.0") for i in range(3)),
        *(xid_event("48", at=i * HOUR, bucket="WORKFLOW_XID_48") for i in range(3)),
        *(xid_event(at=i * HOUR, node="n2") for i in range(3)),
    ]
    assert fired(shipped, mixed) == []


def test_after_firing_the_count_starts_again(shipped: list[analyzer.AnalyzerRule]) -> None:
    events = [xid_event(at=i * HOUR) for i in range(12)]
    escalations = fired(shipped, events)
    assert [e.metadata["trigger"] for e in escalations] == [events[4].idempotency_key, events[9].idempotency_key]


def test_application_xids_have_their_own_rules(shipped: list[analyzer.AnalyzerRule]) -> None:
    app = [xid_event("43", at=i * HOUR, bucket="RESTART_APP") for i in range(6)]
    assert fired(shipped, app) == []
    mmu = fired(shipped, [xid_event("31", at=i * HOUR, bucket="RESTART_APP") for i in range(2)])
    assert [(e.check_name, e.recommended_action, e.error_codes) for e in mmu] == [
        ("RepeatedXid31OnSameGpu", RecommendedAction.RUN_DCGMEUD, ("31",))
    ]


def remediated(at: timedelta, node: str = "n3") -> HealthEvent:
    return HealthEvent(
        agent="remediation",
        component_class=ComponentClass.NODE,
        check_name=NODE_REMEDIATED_CHECK,
        node_name=node,
        generated_at=T0 + at,
        is_fatal=False,
        is_healthy=False,
        message="rebooted",
        processing_strategy=ProcessingStrategy.STORE_AND_ANALYSE,
        metadata={"at": str(at)},
    )


def test_five_remediations_in_a_week_call_support(shipped: list[analyzer.AnalyzerRule]) -> None:
    day = timedelta(days=1)
    assert fired(shipped, [remediated(i * day) for i in range(4)]) == []
    (escalation,) = fired(shipped, [remediated(i * day) for i in range(5)])
    assert (escalation.check_name, escalation.recommended_action, escalation.error_codes) == (
        "RepeatedRemediations",
        RecommendedAction.CONTACT_SUPPORT,
        ("REPEATED_REMEDIATIONS",),
    )
    assert escalation.component_class is ComponentClass.NODE
    assert fired(shipped, [remediated(i * 2 * day) for i in range(5)]) == []  # 8 days


def test_own_and_store_only_events_are_not_counted(shipped: list[analyzer.AnalyzerRule]) -> None:
    own = [xid_event(at=i * HOUR, agent="health-events-analyzer") for i in range(6)]
    stored_only = [xid_event(at=i * HOUR, processing_strategy=ProcessingStrategy.STORE_ONLY) for i in range(6)]
    assert fired(shipped, own + stored_only) == []


def test_check_names_limit_what_a_rule_sees() -> None:
    only_nvml = rules_from(checkNames=["GpuXid"], match="true", threshold=2)
    minute = timedelta(minutes=1)
    assert fired(only_nvml, [xid_event(at=i * minute) for i in range(3)]) == []
    assert len(fired(only_nvml, [xid_event(at=i * minute, check_name="GpuXid") for i in range(2)])) == 1


def test_late_events_are_counted_in_time_order() -> None:
    rule = rules_from(threshold=3, windowSeconds=3600)
    engine = Analyzer(rule)
    assert engine.observe(xid_event(at=timedelta(minutes=50))) == []
    assert engine.observe(xid_event(at=timedelta(minutes=0))) == []  # late; 50 min before the newest
    assert engine.observe(xid_event(at=timedelta(minutes=40))) != []
    engine = Analyzer(rule)
    engine.observe(xid_event(at=timedelta(minutes=70)))
    engine.observe(xid_event(at=timedelta(minutes=0)))  # 70 min before the newest: outside the window
    assert engine.observe(xid_event(at=timedelta(minutes=40))) == []


def test_derived_events_are_deterministic(shipped: list[analyzer.AnalyzerRule]) -> None:
    events = [xid_event(at=i * HOUR) for i in range(5)]
    assert fired(shipped, events) == fired(shipped, events)
    assert fired(shipped, events)[0].idempotency_key == fired(shipped, events)[0].idempotency_key


def test_warm_counts_without_emitting(shipped: list[analyzer.AnalyzerRule]) -> None:
    engine = Analyzer(shipped)
    engine.warm(xid_event(at=i * HOUR) for i in range(4))
    (escalation,) = engine.observe(xid_event(at=5 * HOUR))
    assert escalation.check_name == "RepeatedXidOnSameGpu"


def test_idle_groups_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analyzer, "PURGE_EVERY_EVENTS", 10)
    engine = Analyzer(rules_from(threshold=3, windowSeconds=60))
    for index in range(9):
        engine.observe(xid_event(at=timedelta(seconds=index), pci=f"0000:{index:02x}:00.0"))
    assert engine.group_count() == 9
    engine.observe(xid_event(at=timedelta(hours=1), pci="0000:ff:00.0"))
    assert engine.group_count() == 1


# -- rule files --------------------------------------------------------------------------------


def rules_from(**overrides: Any) -> list[analyzer.AnalyzerRule]:
    rule: dict[str, Any] = {
        "name": "Burst",
        "description": "test rule",
        "match": "event.checkName == 'KernelLogXid'",
        "groupBy": ["node", "gpu"],
        "windowSeconds": 3600,
        "threshold": 3,
        "emit": {"componentClass": "GPU", "isFatal": True, "recommendedAction": "CONTACT_SUPPORT", "message": "m"},
    }
    rule.update(overrides)
    rule = {key: value for key, value in rule.items() if value is not None}
    return analyzer.rules_from_dict(
        {"apiVersion": "dsx.health/v1alpha1", "kind": "AnalyzerRules", "rules": [rule]}, source="rules.yaml"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"groupBy": ["gpu", "rack"]},
            "rules.yaml: rules[0].groupBy: key: 'rack' is not allowed; allowed values: node",
        ),
        ({"groupBy": []}, "rules[0].groupBy: [] is out of range; allowed: a list of length at least 1"),
        ({"match": "event.checkName =="}, "rules.yaml: rules[0].match: invalid CEL"),
        ({"windowSeconds": 0}, "rules[0].windowSeconds: 0 is out of range; allowed: a number above 0"),
        ({"windowSeconds": "20"}, "rules[0].windowSeconds: expected a number, got '20'"),
        ({"threshold": 0}, "rules[0].threshold: 0 is out of range; allowed: an integer at least 1"),
        (
            {"emit": {"componentClass": "GPU", "isFatal": True, "recommendedAction": "REBOOT"}},
            "rules[0].emit: recommendedAction: 'REBOOT' is not allowed; allowed values: NONE, COMPONENT_RESET",
        ),
        (
            {"emit": {"componentClass": "GPU", "isFatal": True, "colour": "red"}},
            "rules[0].emit: field: 'colour' is not allowed",
        ),
        ({"window": 5}, "rules[0]: field: 'window' is not allowed; allowed values: name, match, groupBy"),
        ({"name": ""}, "rules[0].name: must not be empty"),
        ({"checkNames": "KernelLogXid"}, "rules[0].checkNames: expected a list, got 'KernelLogXid'"),
    ],
)
def test_malformed_rules_are_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError) as info:
        rules_from(**overrides)
    assert message in str(info.value)


def test_old_snake_case_rules_read_the_same_with_one_warning_per_old_key(caplog: pytest.LogCaptureFixture) -> None:
    current = rules_from()[0]
    with caplog.at_level(logging.WARNING, logger="dsx.health.decisions.analyzer"):
        old = rules_from(
            match="event.check_name == 'KernelLogXid'",
            groupBy=None,
            windowSeconds=None,
            group_by=["node", "gpu"],
            window_seconds=3600,
            emit={"component_class": "GPU", "is_fatal": True, "recommended_action": "CONTACT_SUPPORT", "message": "m"},
        )[0]
    assert (old.group_by, old.window_seconds, old.emit) == (current.group_by, current.window_seconds, current.emit)
    event = xid_event()
    assert old.match.test({"event": event.content()}) == current.match.test({"event": event.content()}) is True
    warned = sorted(r.getMessage() for r in caplog.records)
    assert warned == [
        "rules.yaml: rules[0].emit: component_class: old snake_case key, read as componentClass;"
        " rename it (keys are camelCase)",
        "rules.yaml: rules[0].emit: is_fatal: old snake_case key, read as isFatal; rename it (keys are camelCase)",
        "rules.yaml: rules[0].emit: recommended_action: old snake_case key, read as recommendedAction;"
        " rename it (keys are camelCase)",
        "rules.yaml: rules[0].group_by: old snake_case key, read as groupBy; rename it (keys are camelCase)",
        "rules.yaml: rules[0].match: event.check_name: old snake_case field, read as event.checkName;"
        " rename it (keys are camelCase)",
        "rules.yaml: rules[0].window_seconds: old snake_case key, read as windowSeconds;"
        " rename it (keys are camelCase)",
    ]


def test_rule_files_need_the_kind_and_unique_names() -> None:
    with pytest.raises(BadInputError, match=r"expected apiVersion dsx\.health/v1alpha1 and kind AnalyzerRules"):
        analyzer.rules_from_dict({"kind": "Other", "rules": []}, source="x.yaml")
    rule = {
        "name": "A",
        "match": "true",
        "groupBy": ["node"],
        "windowSeconds": 1,
        "threshold": 1,
        "emit": {"componentClass": "GPU", "isFatal": False},
    }
    with pytest.raises(BadInputError, match="rule name 'A' is used twice"):
        analyzer.rules_from_dict(
            {"apiVersion": "dsx.health/v1alpha1", "kind": "AnalyzerRules", "rules": [rule, rule]}, source="x.yaml"
        )


# -- as a store consumer -----------------------------------------------------------------------


def stage(store: InMemoryEventStore, rules: list[analyzer.AnalyzerRule], clock: Callable[[], float]) -> AnalyzerStage:
    return AnalyzerStage(store, Analyzer(rules), owner="analyzer-0", clock=clock)


def test_the_stage_derives_appends_and_acks(shipped: list[analyzer.AnalyzerRule]) -> None:
    store = InMemoryEventStore()
    store.append([xid_event(at=i * HOUR) for i in range(5)])
    worker = stage(store, shipped, clock=lambda: (T0 + 6 * HOUR).timestamp())
    assert worker.step() == 5
    assert worker.step() == 1  # its own escalation comes back and is skipped
    assert worker.step() == 0
    derived = store.events(after_sequence=5)
    assert [s.event.check_name for s in derived] == ["RepeatedXidOnSameGpu"]
    record = store.stage_record("analyzer", 5)
    assert record is not None and record.status is StageStatus.DONE
    assert record.detail == {"derived": [derived[0].event.idempotency_key]}
    skipped = store.stage_record("analyzer", 1)
    assert skipped is not None and skipped.status is StageStatus.SKIPPED
    assert store.cursor("analyzer") == 6


def test_a_crash_between_append_and_ack_derives_once(shipped: list[analyzer.AnalyzerRule]) -> None:
    store = InMemoryEventStore()
    store.append([xid_event(at=i * HOUR) for i in range(3)])
    clock = lambda: (T0 + 6 * HOUR).timestamp()  # noqa: E731
    first = stage(store, shipped, clock)
    assert first.step() == 3
    store.append([xid_event(at=i * HOUR) for i in range(3, 5)])
    # the first worker claims, derives and appends, then dies before acking
    batch = store.claim("analyzer", "analyzer-0")
    store.append([d for s in batch for d in first.analyzer.observe(s.event)])
    assert store.last_sequence() == 6

    second = stage(store, shipped, clock)
    assert second.warm() == 3
    assert second.step() == 3  # events 4, 5 and the escalation (6)
    escalations = [s for s in store.events() if s.event.agent == "health-events-analyzer"]
    assert len(escalations) == 1
    assert store.cursor("analyzer") == 6
