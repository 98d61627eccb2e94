"""Area of concern: what RBAC kept from being read is never judged as absent. A denied node list
fails the snapshot (exit 4); a denied Secret or workload list makes the checks and the diff that
need it say `skipped` / `not compared` with the reason, never "not installed" or "missing", and
the `--fail-on-drift` gate fails closed on what it could not compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.cli.main import main
from dsx.errors import ForbiddenError
from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, conformance, deployment, drift, reading, results


def snap_of(reader: FakeClusterReader) -> snapshot.Snapshot:
    return cluster_snapshot.collect(reader, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")


def by_name(found: list[results.CheckResult]) -> dict[str, results.CheckResult]:
    return {r.name: r for r in found}


class CountingReader(FakeClusterReader):
    """Counts list calls, to show a denied kind is asked for once."""

    calls: int = 0

    def list(self, api_version: str, kind: str, namespace: str | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls += 1
        return super().list(api_version, kind, namespace, **kwargs)


def test_a_denied_node_list_fails_the_snapshot(healthy_cluster: FakeClusterReader) -> None:
    healthy_cluster.forbidden_kinds.add("Node")
    with pytest.raises(ForbiddenError, match="cannot list Node"):
        snap_of(healthy_cluster)


def test_unreadable_releases_and_workloads_skip_installed_and_counter_checks(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    healthy_cluster.forbidden_kinds |= {"Secret", "Deployment", "DaemonSet"}
    found = by_name(deployment.check(cluster_recipe, snap_of(healthy_cluster), None))
    installed = found["deployment/gpu-operator/installed"]
    assert installed.status is results.Status.SKIPPED
    assert installed.message.startswith("gpu-operator: cannot tell whether installed: Secret objects: forbidden")
    counted = found["deployment/gpu-operator/Deployment/gpu-operator"]
    assert counted.status is results.Status.SKIPPED
    assert "cannot read: Deployment objects: forbidden" in counted.message
    assert not [r for r in found.values() if r.status is results.Status.FAILED]


def test_a_denied_live_pod_list_skips_the_checks_that_need_pods_and_is_asked_once(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    snap = snap_of(healthy_cluster)
    counting = CountingReader(version=healthy_cluster.version, objects=healthy_cluster.objects)
    counting.forbidden_kinds.add("Pod")
    found = by_name(deployment.check(cluster_recipe, snap, reading.LiveObjects(counting)))
    pods = found["deployment/namespace/gpu-operator/pods"]
    assert pods.status is results.Status.SKIPPED
    assert pods.message == "pods in gpu-operator: cannot read: forbidden: cannot list Pod"
    daemon_set = found["deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset"]
    assert daemon_set.status is results.Status.SKIPPED and "cannot read" in daemon_set.message
    assert found["deployment/gpu-operator/installed"].status is results.Status.PASSED  # from the snapshot

    once = CountingReader(objects=healthy_cluster.objects, forbidden_kinds={"Pod"})
    live = reading.LiveObjects(once)
    for _ in range(3):
        with pytest.raises(ForbiddenError):
            live.objects("v1", "Pod", "gpu-operator")
    assert once.calls == 1


def test_unreadable_daemon_sets_skip_coverage_offline_and_live(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    healthy_cluster.forbidden_kinds.add("DaemonSet")
    snap = snap_of(healthy_cluster)
    offline = by_name(conformance.check(cluster_recipe, snap, None))
    coverage = offline["conformance/gpu-daemonsets-cover-gpu-nodes"]
    assert coverage.status is results.Status.SKIPPED
    assert coverage.message.startswith("cannot read DaemonSets: DaemonSet objects: forbidden")
    live = by_name(conformance.check(cluster_recipe, snap, reading.LiveObjects(healthy_cluster)))
    assert live["conformance/gpu-daemonsets-cover-gpu-nodes"].status is results.Status.SKIPPED
    assert live["conformance/gpu-taints-tolerated"].status is results.Status.SKIPPED
    assert live["conformance/gpu-advertised"].status is results.Status.PASSED


def test_diff_does_not_call_unreadable_components_missing(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    healthy_cluster.forbidden_kinds.add("Secret")
    report = drift.recipe_vs_snapshot(cluster_recipe, snap_of(healthy_cluster))
    assert [c for c in report.changes if c.kind is drift.DriftKind.MISSING_COMPONENT] == []
    assert [subject.split(":", 1)[0] for subject in report.not_compared] == ["cert-manager", "gpu-operator"]
    assert "Secret objects: forbidden" in report.not_compared[0]
    assert not report.complete
    assert report.to_dict()["notCompared"] == list(report.not_compared)


def test_fail_on_drift_fails_closed_on_what_it_could_not_compare(
    cluster_recipe: recipe.Recipe,
    healthy_cluster: FakeClusterReader,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe_file = tmp_path / "recipe.yaml"
    recipe_file.write_text(serialization.dump_yaml(cluster_recipe.to_dict()))
    readable = tmp_path / "readable.yaml"
    readable.write_text(serialization.dump_yaml(snap_of(healthy_cluster).to_dict()))
    healthy_cluster.forbidden_kinds.add("Secret")
    denied = tmp_path / "denied.yaml"
    denied.write_text(serialization.dump_yaml(snap_of(healthy_cluster).to_dict()))

    def diff(snapshot_file: Path, *extra: str) -> int:
        with pytest.raises(SystemExit) as exit_info:
            main(["diff", "--recipe", str(recipe_file), "--snapshot", str(snapshot_file), "--fail-on-drift", *extra])
        return int(exit_info.value.code or 0)

    assert diff(readable, "--format", "table") == 0
    capsys.readouterr()
    assert diff(denied, "--format", "table") == 1
    out = capsys.readouterr().out
    assert "not compared: cert-manager: Secret objects: forbidden" in out
    assert "INCOMPLETE: 2 not compared, no drift" in out
    assert diff(denied, "--format", "json") == 1
    assert json.loads(capsys.readouterr().out)["drift"] is False
