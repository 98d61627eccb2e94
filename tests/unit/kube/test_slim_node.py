"""Area of concern: the sentinel's slim node view keeps everything fleet accounting and the
quarantine stage read (name, version, labels, taints, cordon, GPUs), so the figures from the
view equal those from whole Node objects."""

from __future__ import annotations

from dsx.controllers.kube_nodes import merge_patch, slim_node
from dsx.health.decisions import goodput, nodes
from dsx.health.decisions.ports import NodeChange
from dsx.model.health import NodeState


def whole(name: str, *, cordoned: bool = False, taint: str | None = None) -> dict:
    spec: dict = {"providerID": "aws:///x", "unschedulable": cordoned or None}
    if taint:
        spec["taints"] = [{"key": taint, "effect": "NoSchedule"}]
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "42",
            "labels": {"nvidia.com/gpu.product": "H100", "nvidia.com/gpu.count": "8"},
            "annotations": {"a": "b"},
            "managedFields": [{"manager": "kwok"}] * 5,
        },
        "spec": spec,
        "status": {
            "capacity": {"nvidia.com/gpu": "8", "cpu": "96"},
            "conditions": [{"type": "Ready", "status": "True"}] * 5,
            "images": [{"names": ["x" * 200]}] * 20,
            "nodeInfo": {"kernelVersion": "6.8"},
        },
    }


def test_the_view_answers_fleet_accounting_exactly_as_whole_nodes() -> None:
    fleet = [whole("a"), whole("b", cordoned=True), whole("c", taint="held"), whole("d")]
    states = {"d": NodeState.QUARANTINED}
    slim = [slim_node(n) for n in fleet]
    assert goodput.capacity_by_bucket(slim, states, held_taint="held") == goodput.capacity_by_bucket(
        fleet, states, held_taint="held"
    )
    assert [nodes.name(n) for n in slim] == ["a", "b", "c", "d"]
    assert "images" not in slim[0]["status"] and "managedFields" not in slim[0]["metadata"]
    assert len(str(slim[0])) * 4 < len(str(fleet[0]))


def test_a_change_computed_on_the_view_is_the_one_computed_on_the_node() -> None:
    node = whole("a", taint="other")
    change = NodeChange(unschedulable=True, labels={"x": "y"}, add_taints=())
    assert merge_patch(slim_node(node), change) == merge_patch(node, change)


def test_the_view_serves_rules_that_read_only_what_it_keeps() -> None:
    from dsx.controllers.kube_nodes import slim_view_serves
    from dsx.health.decisions.policy import default

    served = [
        "event.isFatal && event.componentClass == 'GPU'",
        "node.metadata.labels['nvidia.com/gpu.product'] == 'H100'",
        "node.spec.taints.exists(t, t.key == 'x')",
        "node.status.capacity['nvidia.com/gpu'] == '8'",
        "event.message == 'node.status.conditions'",  # inside a string: not a read of the node
        "nodepool.status == 'x' && event.node.status == 1",  # other names
    ]
    whole_node = [
        "node.status.conditions.exists(c, c.type == 'Ready')",
        "node.status.allocatable['nvidia.com/gpu'] == '8'",
        "has(node.spec)",
        "node['metadata']['labels'].size() > 0",
        "size(node) > 0",
    ]
    for expression in served:
        assert slim_view_serves([expression]), expression
    for expression in whole_node:
        assert not slim_view_serves([expression]), expression
        assert not slim_view_serves([served[0], expression])
    shipped = default().quarantine.rule_sets
    assert slim_view_serves(p.source for r in shipped for p in (*r.match_all, *r.match_any))
