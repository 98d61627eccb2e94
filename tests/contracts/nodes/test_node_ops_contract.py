"""Contract: `NodeOps` (dsx.health.decisions.ports) — the fake and the Kubernetes adapter answer the same cases.

`dsx.testing.inmemory_nodes.InMemoryNodeOps` stands in for a cluster in the pipeline's unit
tests; `dsx.controllers.kube_nodes.KubeNodeOps` is the real thing, here against a real
kube-apiserver (dsx sim). Every case runs on both, so what the unit tests assume of the fake
is what the cluster does. The real backend writes a Node object of its own (no kubelet behind
it) and deletes it afterwards; the simulated nodes other tests use are left alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dsx import errors
from dsx.health.decisions.ports import EvictionOutcome, NodeChange, NodeOps, Taint, TaintEffect
from dsx.testing.inmemory_nodes import InMemoryNodeOps

OURS = "contract.dsx.run"


@dataclass
class Cluster:
    ops: NodeOps
    node: str
    namespace: str
    pod: str
    label: tuple[str, str]


def _node(name: str, label: tuple[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {label[0]: label[1]}}}


def _pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
    }


@pytest.fixture(params=["fake", pytest.param("kube", marks=pytest.mark.integration)])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    run = uuid.uuid4().hex[:8]
    node, label = f"contract-{run}", (f"{OURS}/run", run)
    if request.param == "fake":
        yield Cluster(InMemoryNodeOps([_node(node, label)], [_pod("p-0", "ns", node)]), node, "ns", "p-0", label)
        return
    from dsx.controllers.kube_nodes import KubeNodeOps

    client = request.getfixturevalue("kube_client")
    namespace = request.getfixturevalue("sim_namespace")
    client.create(_node(node, label))
    try:
        client.create_pod(_pod("p-0", namespace, node))
        yield Cluster(KubeNodeOps(client), node, namespace, "p-0", label)
    finally:
        client.delete("v1", "Node", node)


def _ours(node: dict[str, Any]) -> tuple[dict[str, str], dict[str, str], bool, list[tuple[str, str, str]]]:
    """The parts of a node this suite writes (a real node also carries the API server's own)."""
    metadata, spec = node.get("metadata") or {}, node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if t["key"].startswith(OURS)]
    return (
        {k: v for k, v in (metadata.get("labels") or {}).items() if k.startswith(OURS)},
        {k: v for k, v in (metadata.get("annotations") or {}).items() if k.startswith(OURS)},
        bool(spec.get("unschedulable")),
        sorted((t["key"], t["effect"], t.get("value", "")) for t in taints),
    )


def test_get_node_returns_the_node_and_refuses_an_unknown_one(cluster: Cluster) -> None:
    assert cluster.ops.get_node(cluster.node)["metadata"]["name"] == cluster.node
    with pytest.raises(errors.NotFoundError):
        cluster.ops.get_node(f"{cluster.node}-absent")


def test_list_nodes_selects_by_every_label(cluster: Cluster) -> None:
    key, value = cluster.label
    assert [n["metadata"]["name"] for n in cluster.ops.list_nodes({key: value})] == [cluster.node]
    assert cluster.ops.list_nodes({key: "other"}) == []


def test_change_node_writes_everything_in_one_change_and_undoes_it(cluster: Cluster) -> None:
    taint = Taint(f"{OURS}/fault", TaintEffect.NO_SCHEDULE, "xid79")
    change = NodeChange(
        unschedulable=True,
        labels={f"{OURS}/state": "quarantined"},
        annotations={f"{OURS}/reason": "xid 79"},
        add_taints=(taint,),
    )
    after = cluster.ops.change_node(cluster.node, change)
    expected = ({cluster.label[0]: cluster.label[1], f"{OURS}/state": "quarantined"}, {f"{OURS}/reason": "xid 79"})
    assert _ours(after) == (*expected, True, [(taint.key, "NoSchedule", "xid79")])
    assert _ours(cluster.ops.get_node(cluster.node)) == _ours(after)
    assert _ours(cluster.ops.change_node(cluster.node, change)) == _ours(after)  # the same change again: no change

    undo = NodeChange(
        unschedulable=False,
        labels={f"{OURS}/state": None},
        annotations={f"{OURS}/reason": None},
        remove_taints=(taint.key,),
    )
    cluster.ops.change_node(cluster.node, undo)
    assert _ours(cluster.ops.get_node(cluster.node)) == ({cluster.label[0]: cluster.label[1]}, {}, False, [])


def test_a_change_worked_out_from_the_node_is_worked_out_from_the_node_as_it_is(cluster: Cluster) -> None:
    """`current` a moment old (the node watch's copy): the change is worked out again from the
    node as it is now, not from the old copy (the quarantine stage decides who cordoned it)."""
    old = cluster.ops.get_node(cluster.node)
    cluster.ops.change_node(cluster.node, NodeChange(annotations={f"{OURS}/by": "someone"}, unschedulable=True))
    seen: list[bool] = []

    def mark(node: Any) -> NodeChange:
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        seen.append(cordoned)
        return NodeChange(annotations={f"{OURS}/precordoned": str(cordoned).lower()}, unschedulable=True)

    after = cluster.ops.change_node(cluster.node, mark, current=old)
    assert seen[-1] is True
    assert _ours(after)[1] == {f"{OURS}/by": "someone", f"{OURS}/precordoned": "true"}
    assert _ours(cluster.ops.get_node(cluster.node)) == _ours(after)


def test_change_node_refuses_an_unknown_node(cluster: Cluster) -> None:
    with pytest.raises(errors.NotFoundError):
        cluster.ops.change_node(f"{cluster.node}-absent", NodeChange(unschedulable=True))


def test_pods_on_the_node_are_listed_evicted_once_and_then_gone(cluster: Cluster) -> None:
    assert [p["metadata"]["name"] for p in cluster.ops.list_pods(cluster.node)] == [cluster.pod]
    assert cluster.ops.evict(cluster.namespace, cluster.pod, grace_period_seconds=0) is EvictionOutcome.EVICTED
    assert cluster.ops.list_pods(cluster.node) == []
    assert cluster.ops.evict(cluster.namespace, cluster.pod, grace_period_seconds=0) is EvictionOutcome.ALREADY_GONE
    assert cluster.ops.delete_pod(cluster.namespace, cluster.pod, grace_period_seconds=0) is False


def test_delete_pod_removes_it_outright(cluster: Cluster) -> None:
    assert cluster.ops.delete_pod(cluster.namespace, cluster.pod, grace_period_seconds=0) is True
    assert cluster.ops.list_pods(cluster.node) == []


def test_a_condition_is_set_once_per_type_and_changed_in_place(cluster: Cluster) -> None:
    """What other tools read: one condition of the type, its latest status, reason and message."""
    condition_type = "ContractGpuHealthy"
    cluster.ops.set_condition(cluster.node, condition_type, "False", reason="Quarantined", message="xid 79")
    cluster.ops.set_condition(cluster.node, condition_type, "True", reason="Recertified", message="passed")
    found = [c for c in cluster.ops.get_node(cluster.node)["status"]["conditions"] if c["type"] == condition_type]
    assert [(c["status"], c["reason"], c["message"]) for c in found] == [("True", "Recertified", "passed")]
    with pytest.raises(errors.NotFoundError):
        cluster.ops.set_condition(f"{cluster.node}-absent", condition_type, "True", reason="x", message="")
