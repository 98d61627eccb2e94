"""Area of concern: a node watch that comes back after etcd compacted its resume point (a real
410 Gone from the apiserver) relists and reports what changed meanwhile — no update is lost."""

from __future__ import annotations

from typing import Any

import pytest

from dsx.kube.client import KubeClient
from dsx.kube.watch import EventType, WatchEvent
from dsx.sim import nodes as sim_nodes

pytestmark = pytest.mark.integration


def _until(events: Any, predicate: Any) -> WatchEvent:
    for event in events:
        if predicate(event):
            return event
    raise AssertionError("the expected event did not arrive before the deadline")


def test_watch_resumes_after_compaction_without_missing_an_update(kube_client: KubeClient, sim_cluster: Any) -> None:
    first, second = sim_cluster.node_names[0], sim_cluster.node_names[1]
    watch = kube_client.watch_nodes({sim_nodes.CLUSTER_LABEL: sim_cluster.name})
    initial = watch.sync()
    assert len(initial) == len(sim_cluster.node_names)
    resume_from = watch.resource_version

    # while the watcher is away: a change, another write, then etcd forgets everything up to now
    changed = kube_client.label_node(first, {"dsx.run/generation": "while-away"})
    kube_client.annotate_node(second, {"dsx.run/touched": "yes"})
    compacted = sim_cluster.cluster.compact_etcd()
    assert int(resume_from) < int(changed["metadata"]["resourceVersion"]) < compacted

    seen = _until(
        watch.events(timeout_seconds=30),
        lambda e: e.name == first and e.object["metadata"]["labels"].get("dsx.run/generation") == "while-away",
    )
    assert seen.type is EventType.MODIFIED
    assert seen.relisted is True
    assert (watch.relists, watch.expirations) == (1, 1)  # the apiserver answered 410 Gone

    # and it keeps watching from the relist's version
    kube_client.label_node(second, {"dsx.run/generation": "after"})
    live = _until(
        watch.events(timeout_seconds=30),
        lambda e: e.name == second and e.object["metadata"]["labels"].get("dsx.run/generation") == "after",
    )
    assert live.relisted is False
    assert watch.relists == 1
    kube_client.label_node(first, {"dsx.run/generation": None})
    kube_client.label_node(second, {"dsx.run/generation": None})
    kube_client.annotate_node(second, {"dsx.run/touched": None})


def test_watch_without_sync_reports_the_initial_list_as_added(kube_client: KubeClient, sim_cluster: Any) -> None:
    watch = kube_client.watch_nodes({sim_nodes.RACK_LABEL: "rack-01"})
    added = []
    for event in watch.events(timeout_seconds=2):
        added.append(event)
        if len(added) == 2:
            break
    assert {e.type for e in added} == {EventType.ADDED}
    assert sorted(e.name for e in added) == sorted(sim_cluster.node_names[4:6])


def test_pod_watch_sees_a_pod_start(kube_client: KubeClient, sim_namespace: str, sim_cluster: Any) -> None:
    watch = kube_client.watch_pods(sim_namespace)
    assert watch.sync() == []
    kube_client.create_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "watched", "namespace": sim_namespace},
            "spec": {"nodeName": sim_cluster.node_names[0], "containers": [{"name": "c", "image": "busybox"}]},
        }
    )
    running = _until(watch.events(timeout_seconds=30), lambda e: e.object.get("status", {}).get("phase") == "Running")
    assert running.namespace == sim_namespace
    assert running.type is EventType.MODIFIED
