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


def test_lists_come_in_pages_and_give_every_node_once(
    kube_client: KubeClient, sim_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paged with `limit` and `continue` (here 2 a page): the same nodes as the sim has, each once, and the
    metadata-only list carries no status (the apiserver's PartialObjectMetadataList)."""
    from dsx.kube import watch as watch_module

    monkeypatch.setattr(watch_module, "PAGE_SIZE", 2)
    asked: list[dict[str, str]] = []
    real_get = kube_client._http.get

    def counting_get(path: str, **kwargs: Any) -> Any:
        asked.append(dict(kwargs.get("params") or {}))
        return real_get(path, **kwargs)

    monkeypatch.setattr(kube_client._http, "get", counting_get)
    selector = {sim_nodes.CLUSTER_LABEL: sim_cluster.name}
    expected = sorted(sim_cluster.node_names)
    view = kube_client.watch_nodes(selector)
    assert sorted(n["metadata"]["name"] for n in view.sync()) == expected
    assert len(asked) == -(-len(expected) // 2)  # ceil(nodes / 2) pages
    assert all(a["limit"] == "2" for a in asked) and sum(1 for a in asked if "continue" in a) == len(asked) - 1
    assert view.resource_version

    from dsx.kube import client as client_module

    raw, _ = watch_module.list_pages(
        kube_client._http, "/api/v1/nodes", {"labelSelector": f"{sim_nodes.CLUSTER_LABEL}={sim_cluster.name}"}, "",
        headers=client_module._METADATA_ONLY,
    )  # fmt: skip
    assert raw and all("status" not in n and "spec" not in n for n in raw)  # the server sent metadata alone
    metadata = kube_client.list_node_metadata(selector)
    assert sorted(n["metadata"]["name"] for n in metadata) == expected
    assert all(set(n) == {"metadata"} and n["metadata"]["labels"][sim_nodes.CLUSTER_LABEL] for n in metadata)
