"""Area of concern: the shipped health rule files (analyzer rules, node policies) load, say why
each rule exists, and stay consistent with the checks the monitors actually emit."""

from __future__ import annotations

from dsx.health.decisions import analyzer
from dsx.health.parsing import kube_objects
from dsx.host import kernel_log, nvml
from dsx.model.health import NODE_REMEDIATED_CHECK, RecommendedAction

KNOWN_CHECKS = {
    kernel_log.XID_CHECK,
    kernel_log.SXID_CHECK,
    nvml.XID_CHECK,
    "GpuNvlinkErrors",
    "GpuClockSlowdown",
    NODE_REMEDIATED_CHECK,
}


def test_analyzer_rules_load_and_are_explained() -> None:
    rules = analyzer.shipped_rules()
    assert rules
    for rule in rules:
        assert rule.description.strip(), rule.name
        assert rule.threshold >= 2, f"{rule.name}: a threshold of 1 is not a correlation"
        assert rule.emit.check_name == rule.name
        assert rule.emit.is_fatal == (rule.emit.recommended_action is not RecommendedAction.NONE), rule.name


def test_analyzer_rules_look_at_checks_the_monitors_emit() -> None:
    for rule in analyzer.shipped_rules():
        assert rule.check_names, f"{rule.name}: no check_names (every event would pay for its CEL)"
        assert rule.check_names <= KNOWN_CHECKS, (
            f"{rule.name}: unknown checks {sorted(rule.check_names - KNOWN_CHECKS)}"
        )


def test_node_policies_load_and_are_explained() -> None:
    policies = kube_objects.shipped_policies()
    assert {p.name for p in policies} >= {"node-not-ready", "gpu-capacity-lost"}
    for policy in policies:
        assert policy.description.strip(), policy.name
        assert policy.event.metadata["policy"] == policy.name
        assert policy.event.is_fatal == (policy.event.recommended_action is not RecommendedAction.NONE), policy.name
