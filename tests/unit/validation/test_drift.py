"""Area of concern: drift lists exactly what differs — components, versions, values key by key with
paths, release status, pool label drift — between recipe and cluster, two recipes or two snapshots,
and nothing when they agree (metadata and capture times are not drift)."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsx.errors import BadInputError
from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, drift


def snap_of(reader: FakeClusterReader, captured_at: str = "2026-02-02T15:00:00Z") -> snapshot.Snapshot:
    return cluster_snapshot.collect(reader, generator="dsx/test", captured_at=captured_at)


def kinds(report: drift.DriftReport) -> list[tuple[str, str, str]]:
    return [(c.kind.value, c.subject, c.path) for c in report.changes]


def test_matching_cluster_has_no_drift(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    report = drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster))
    assert report.changes == ()
    assert report.to_dict()["drift"] is False
    assert report.notes == ("dynamo-crds: installs only CRDs; dsx validate --phase deployment checks them",)


def test_values_drift_key_by_key(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    values = {"driver": {"version": "570.86.15"}, "cdi": {"enabled": True}, "toolkit": {"env": [{"name": "A"}]}}
    healthy_cluster.add(objects.release("gpu-operator", "gpu-operator", "v25.10.1", values, revision=2))
    report = drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster))
    assert [c.to_dict() for c in report.changes] == [
        {
            "kind": "values",
            "subject": "gpu-operator",
            "path": "driver.version",
            "expected": "580.95.05",
            "actual": "570.86.15",
        },
        {"kind": "values", "subject": "gpu-operator", "path": "toolkit", "actual": {"env": [{"name": "A"}]}},
    ]


def test_version_status_missing_and_extra(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.objects = [
        o for o in healthy_cluster.objects if not (o["kind"] == "Secret" and "cert-manager" in o["metadata"]["name"])
    ]
    values = {"driver": {"version": "580.95.05"}, "cdi": {"enabled": True}}
    healthy_cluster.add(
        objects.release("gpu-operator", "gpu-operator", "v25.3.4", values, revision=3, status="failed"),
        objects.release("grafana", "monitoring", "9.2.1"),
    )
    report = drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster))
    assert [c.to_dict() for c in report.changes] == [
        {"kind": "missing-component", "subject": "cert-manager", "expected": "cert-manager v1.17.2"},
        {"kind": "version", "subject": "gpu-operator", "expected": "v25.10.1", "actual": "v25.3.4"},
        {"kind": "status", "subject": "gpu-operator", "expected": "deployed", "actual": "failed"},
        {"kind": "extra-component", "subject": "monitoring/grafana", "actual": "grafana 9.2.1"},
    ]
    assert report.to_dict()["summary"] == {"extra-component": 1, "missing-component": 1, "status": 1, "version": 1}


def test_one_nodes_driver_label_is_pool_drift(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.gpu_node("gpu-2"))
    assert drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster)).changes == ()
    node = next(o for o in healthy_cluster.objects if o["kind"] == "Node" and o["metadata"]["name"] == "gpu-2")
    node["metadata"]["labels"]["nvidia.com/cuda.driver.major"] = "570"
    report = drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster))
    assert [c.to_dict() for c in report.changes] == [
        {
            "kind": "pool-label",
            "subject": "node.kubernetes.io/instance-type=p5.48xlarge",
            "path": "nvidia.com/cuda.driver.major",
            "expected": "580",
            "actual": {"570": ["gpu-2"]},
            "detail": "580 on gpu-0, gpu-1; 570 on gpu-2",
        }
    ]


def test_placement_labels_are_not_drift(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(
        objects.gpu_node(
            "gpu-2",
            **{
                "nvidia.com/gpu.clique": "abc.1",
                "cloud.google.com/gce-topology-host": "h2",
                "topology.k8s.aws/network-node-layer-3": "nn-3",
                "dsx.run/quarantine": "true",
                "sim.dsx.run/not-ready": "true",
            },
        )
    )
    assert drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster)).changes == ()


def test_pool_label_itself_is_compared(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.gpu_node("gpu-2", **{"nvidia.com/gpu.family": "hopper"}))
    report = drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster))
    assert kinds(report) == [("pool-label", "node.kubernetes.io/instance-type=p5.48xlarge", "nvidia.com/gpu.family")]
    assert report.changes[0].expected == "(none)"


def test_non_helm_component_by_image_tag(
    recipe_factory: Callable[..., recipe.Recipe], objects: types.SimpleNamespace
) -> None:
    target = recipe_factory(
        components=[{"name": "kueue", "type": "Manifest", "namespace": "kueue-system", "version": "v0.13.4"}]
    )
    absent = FakeClusterReader()
    assert kinds(drift.recipe_vs_snapshot(target, snap_of(absent))) == [("missing-component", "kueue", "")]
    asserted = recipe_factory(
        components=[
            {
                "name": "kueue",
                "type": "Manifest",
                "namespace": "kueue-system",
                "version": "v0.13.4",
                "healthCheckAsserts": [{"kind": "Deployment", "name": "kueue-controller-manager"}],
            }
        ]
    )
    assert kinds(drift.recipe_vs_snapshot(asserted, snap_of(absent))) == [("missing-component", "kueue", "")]
    old = FakeClusterReader().add(objects.deployment("kueue-system", "kueue", "registry.k8s.io/kueue/kueue:v0.12.0"))
    report = drift.recipe_vs_snapshot(target, snap_of(old))
    assert [c.to_dict() for c in report.changes] == [
        {"kind": "version", "subject": "kueue", "expected": "v0.13.4", "actual": "v0.12.0"}
    ]


def test_recipe_vs_node_only_snapshot_is_bad_input(cluster_recipe: recipe.Recipe) -> None:
    with pytest.raises(BadInputError, match="no cluster facts"):
        drift.recipe_vs_snapshot(cluster_recipe, snapshot.Snapshot(source="n.yaml"))


def test_recipe_vs_recipe(recipe_factory: Callable[..., recipe.Recipe]) -> None:
    base = [
        {"name": "a", "chart": "a", "namespace": "x", "version": "1.0.0", "values": {"k": [1, 2]}},
        {"name": "b", "chart": "b", "namespace": "x", "version": "2.0.0"},
    ]
    changed = [
        {"name": "a", "chart": "a2", "namespace": "y", "version": "1.1.0", "values": {"k": [1, 3], "n": None}},
        {"name": "c", "chart": "c", "namespace": "x", "version": "3.0.0"},
    ]
    left = recipe_factory(components=base, constraints=["K8s.server.version >= 1.30"])
    right = recipe_factory(components=changed, constraints=["K8s.server.version >= 1.32", "GPU.driver.version >= 580"])
    report = drift.recipe_vs_recipe(left, right)
    assert [c.to_dict() for c in report.changes] == [
        {"kind": "missing-component", "subject": "b", "expected": "2.0.0"},
        {"kind": "extra-component", "subject": "c", "actual": "3.0.0"},
        {"kind": "version", "subject": "a", "expected": "1.0.0", "actual": "1.1.0"},
        {"kind": "namespace", "subject": "a", "expected": "x", "actual": "y"},
        {"kind": "field", "subject": "a", "path": "chart", "expected": "a", "actual": "a2"},
        {"kind": "values", "subject": "a", "path": "k[1]", "expected": 2, "actual": 3},
        {"kind": "values", "subject": "a", "path": "n", "actual": None},
        {"kind": "constraint", "subject": "GPU.driver.version", "actual": "GPU.driver.version >= 580"},
        {
            "kind": "constraint",
            "subject": "K8s.server.version",
            "expected": "K8s.server.version >= 1.30",
            "actual": "K8s.server.version >= 1.32",
        },
        {"kind": "field", "subject": "recipe", "path": "deploymentOrder[1]", "expected": "b", "actual": "c"},
    ]
    assert drift.recipe_vs_recipe(left, left).changes == ()


def test_snapshot_vs_snapshot(healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace) -> None:
    before = snap_of(healthy_cluster)
    after_reader = FakeClusterReader(version="v1.34.2").add(*objects.healthy(("gpu-0", "gpu-1", "gpu-2")))
    node = next(o for o in after_reader.objects if o["kind"] == "Node" and o["metadata"]["name"] == "gpu-1")
    node["metadata"]["labels"]["nvidia.com/cuda.driver.minor"] = "82"
    node["spec"]["taints"] = []
    after = snap_of(after_reader, captured_at="2026-03-01T00:00:00Z")
    report = drift.snapshot_vs_snapshot(replace(before, source="a.yaml"), replace(after, source="b.yaml"))
    assert [c.to_dict() for c in report.changes] == [
        {"kind": "server-version", "subject": "cluster", "expected": "v1.34.1", "actual": "v1.34.2"},
        {"kind": "node-added", "subject": "gpu-2", "actual": "NVIDIA-H100-80GB-HBM3"},
        {
            "kind": "node",
            "subject": "gpu-1",
            "path": 'labels["nvidia.com/cuda.driver.minor"]',
            "expected": "95",
            "actual": "82",
        },
        {
            "kind": "node",
            "subject": "gpu-1",
            "path": "taints[0]",
            "expected": {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        },
    ]
    assert report.expected.source == "a.yaml" and report.actual.source == "b.yaml"
    assert drift.snapshot_vs_snapshot(before, replace(before, captured_at="2030-01-01T00:00:00Z")).changes == ()


def test_compare_documents_dispatches_and_refuses_mixed_kinds(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    snap = snap_of(healthy_cluster).to_dict()
    doc = cluster_recipe.to_dict()
    assert not drift.compare_documents(doc, doc, left_source="a", right_source="b").drifted
    assert not drift.compare_documents(snap, snap, left_source="a", right_source="b").drifted
    assert not drift.compare_documents(doc, snap, left_source="a", right_source="b").drifted
    with pytest.raises(BadInputError, match="cannot compare kind 'Snapshot' with 'Recipe'"):
        drift.compare_documents(snap, doc, left_source="a", right_source="b")


def test_paths_quote_keys_with_dots() -> None:
    assert drift.value_changes({"a": {"b.c": 1}}, {"a": {"b.c": 2}}) == [('a["b.c"]', 1, 2)]
    assert drift.value_changes({"x": [1]}, {"x": [1, 2]}) == [("x[1]", drift.ABSENT, 2)]
    assert drift.value_changes({"x": 1}, {"x": 1.0}) == []
    assert drift.value_changes({"x": True}, {"x": 1}) == [("x", True, 1)]
    assert drift.value_changes({"x": "1"}, {"x": 1}) == [("x", "1", 1)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


@given(json_values, json_values)
def test_no_changes_exactly_when_equal(left: Any, right: Any) -> None:
    changes = drift.value_changes(left, right)
    assert (changes == []) == (left == right and _same_types(left, right))
    assert drift.value_changes(left, left) == []


def _same_types(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) or (
        isinstance(a, int | float)
        and isinstance(b, int | float)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    )
