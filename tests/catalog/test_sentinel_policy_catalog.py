"""Area of concern: the shipped sentinel policy (rules/sentinel-default.yaml) is safe by default and
consistent — cluster-changing stages off, quarantine rules that only ever match fatal events
and do match the faults the monitors emit, escalation for what no provider can fix, node-level
re-certification categories that exist, and the deploy/sentinel ConfigMap carrying the same
document."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsx import serialization
from dsx.files import documents
from dsx.health.decisions import incidents, nodes, policy, quarantine
from dsx.host import kernel_log
from dsx.model import certify_catalog as certify_catalog
from dsx.model.certification import Scale
from dsx.model.health import (
    ComponentClass,
    Entity,
    EntityType,
    HealthEvent,
    ProcessingStrategy,
    RecommendedAction,
)

DEPLOY_POLICY = Path(__file__).resolve().parents[2] / "deploy" / "sentinel" / "policy.yaml"
NODE = {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {}}
SHIPPED = policy.default()


def event(component: ComponentClass, action: RecommendedAction, *, fatal: bool, check: str = "Check") -> HealthEvent:
    return HealthEvent(
        agent="test",
        component_class=component,
        check_name=check,
        node_name="n1",
        generated_at=datetime(2026, 11, 29, tzinfo=UTC),
        is_fatal=fatal,
        is_healthy=False,
        message="x",
        recommended_action=action,
        custom_recommended_action="x" if action is RecommendedAction.CUSTOM else "",
        entities=(Entity(EntityType.PCI, "0000:3b:00.0"),),
    )


def test_the_default_policy_only_observes() -> None:
    assert SHIPPED.switch(policy.Stage.ANALYZER).enabled
    assert [s for s in policy.CLUSTER_CHANGING if SHIPPED.switch(s).enabled] == []
    assert SHIPPED.breaker.enabled and SHIPPED.breaker.max_quarantined_percent <= 20


@pytest.mark.parametrize("component", list(ComponentClass))
@pytest.mark.parametrize("action", list(RecommendedAction))
def test_no_rule_set_matches_a_non_fatal_event(component: ComponentClass, action: RecommendedAction) -> None:
    decision = quarantine.decide(event(component, action, fatal=False), NODE, SHIPPED.quarantine)
    assert not decision.matched


@pytest.mark.parametrize(
    ("component", "action", "check"),
    [
        (ComponentClass.GPU, RecommendedAction.RESTART_BM, kernel_log.XID_CHECK),
        (ComponentClass.NVSWITCH, RecommendedAction.RESTART_BM, kernel_log.SXID_CHECK),
        (ComponentClass.GPU, RecommendedAction.COMPONENT_RESET, "GpuRemappedRows"),
        (ComponentClass.GPU, RecommendedAction.RESTART_BM, "NodeGpuCapacityLost"),
        (ComponentClass.NODE, RecommendedAction.CONTACT_SUPPORT, "RepeatedRemediations"),
    ],
)
def test_fatal_faults_the_monitors_emit_are_quarantined(component, action, check) -> None:
    decision = quarantine.decide(event(component, action, fatal=True, check=check), NODE, SHIPPED.quarantine)
    assert decision.matched and decision.cordon
    assert all(t.key.startswith(nodes.PREFIX) for t in decision.taints)


@pytest.mark.parametrize("strategy", [ProcessingStrategy.STORE_ONLY, ProcessingStrategy.STORE_AND_ANALYSE])
def test_events_kept_for_the_record_never_open_a_fault(strategy: ProcessingStrategy) -> None:
    fatal = event(ComponentClass.GPU, RecommendedAction.RESTART_BM, fatal=True)
    assert incidents.opens_fault(fatal)
    assert not incidents.opens_fault(dataclasses.replace(fatal, processing_strategy=strategy))


def test_what_no_provider_can_fix_escalates() -> None:
    mapped = set(SHIPPED.remediation.actions)
    assert RecommendedAction.CONTACT_SUPPORT not in mapped and RecommendedAction.RUN_FIELDDIAG not in mapped
    assert {RecommendedAction.RESTART_BM, RecommendedAction.COMPONENT_RESET} <= mapped
    assert SHIPPED.remediation.provider.kind is policy.ProviderKind.NONE


def test_recertification_runs_existing_node_level_categories() -> None:
    known = set(certify_catalog.names())
    for choice in SHIPPED.certification.categories:
        assert choice.name in known
        scale = choice.scale or certify_catalog.get(choice.name).scale
        assert scale is Scale.INTRA_NODE, choice.name
    assert set(SHIPPED.certification.group_categories) <= known
    assert SHIPPED.certification.max_running >= 1


def test_system_namespaces_are_never_drained() -> None:
    assert {"kube-system", "kube-node-lease", "gpu-operator"} <= set(SHIPPED.drain.system_namespaces)


def test_the_deployed_policy_is_the_shipped_one() -> None:
    (config_map,) = serialization.parse_yaml_documents(DEPLOY_POLICY.read_text(), source=str(DEPLOY_POLICY))
    deployed = serialization.parse_yaml(config_map["data"]["policy.yaml"], source="policy ConfigMap")
    assert deployed == documents.load_mapping_file(policy.DEFAULT_PATH)
