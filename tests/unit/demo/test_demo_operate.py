"""Area of concern: the sentinel policy the demo runs — the shipped policy with the stages that
change the cluster acting and a breaker that lets one of 8 nodes into quarantine — and the
sentinel's action log reaching the demo's timeline."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from dsx.demo import journal, lifecycle, operate
from dsx.files import documents
from dsx.health.decisions import policy as policy_module


def shipped() -> dict:
    return documents.load_mapping_file(policy_module.DEFAULT_PATH)


def test_demo_policy_acts_on_every_pipeline_stage_and_keeps_the_rest() -> None:
    chosen = policy_module.from_dict(operate.demo_policy(shipped()), source="demo")
    for stage in policy_module.PIPELINE:
        assert chosen.switch(stage).acting, stage
    default = policy_module.default()
    assert chosen.switch(policy_module.Stage.VALIDATION) == default.switch(policy_module.Stage.VALIDATION)
    assert chosen.quarantine == default.quarantine
    assert chosen.certification == default.certification


def test_the_breaker_admits_one_node_of_the_demo_cluster_and_not_three() -> None:
    chosen = policy_module.from_dict(operate.demo_policy(shipped()), source="demo")
    one_node_percent = 100.0 / lifecycle.NODE_COUNT
    assert chosen.breaker.enabled
    assert one_node_percent <= chosen.breaker.max_quarantined_percent < 3 * one_node_percent
    assert policy_module.default().breaker.max_quarantined_percent < one_node_percent  # why the demo changes it


def test_demo_policy_leaves_the_shipped_document_alone() -> None:
    original = shipped()
    operate.demo_policy(original)
    assert original == shipped()


def test_sentinel_actions_become_timeline_entries() -> None:
    log = journal.Journal(lambda _: None, clock=lambda: 5.0, wall_clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    handler = operate.TimelineHandler(log)
    record = logging.LogRecord("dsx.sentinel.actions", logging.INFO, __file__, 1, "x", (), None)
    record.stage, record.action, record.node = "quarantine", "cordon", "gpu-node-02"
    handler.emit(record)
    (entry,) = log.timeline
    assert (entry.source, entry.node, entry.message) == (
        "sentinel",
        "gpu-node-02",
        "sentinel quarantine: cordon gpu-node-02",
    )


def test_quarantine_waits_for_the_cordon_that_follows_the_store_transition(monkeypatch) -> None:
    """The sentinel records QUARANTINED before it writes the node; the demo must not read the node in between."""
    from dsx.health.decisions import nodes as health_nodes

    plain = {"metadata": {"name": "gpu-node-02", "annotations": {}}, "spec": {}}
    cordoned = {
        "metadata": {"name": "gpu-node-02", "annotations": {health_nodes.REASON_ANNOTATION: "fatal-gpu-fault: xid 79"}},
        "spec": {
            "unschedulable": True,
            "taints": [{"key": f"{health_nodes.PREFIX}/quarantined", "value": "gpu-fault", "effect": "NoSchedule"}],
        },
    }
    reads = iter([plain, plain, cordoned])
    steps = operate.Steps.__new__(operate.Steps)
    steps.node = "gpu-node-02"
    monkeypatch.setattr(steps, "_wait_for", lambda *_: 0.4, raising=False)
    monkeypatch.setattr(steps, "_node", lambda: next(reads), raising=False)
    monkeypatch.setattr(steps, "_event", lambda: "event KernelLogXid 79", raising=False)
    monkeypatch.setattr(operate, "POLL_SECONDS", 0.0)
    said = steps._quarantined()
    assert said.startswith("gpu-node-02 cordoned and tainted sentinel.dsx.run/quarantined=gpu-fault:NoSchedule")
    assert "rule fatal-gpu-fault" in said
