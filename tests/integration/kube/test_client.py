"""Area of concern: every KubeClient operation against a real kube-apiserver (dsx sim).

Selectors, eviction against PodDisruptionBudgets, server-side apply ownership, RBAC and
error translation are the apiserver's behaviour, so they are checked here, not mocked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsx import errors, serialization
from dsx.files import documents
from dsx.kube.client import EvictionOutcome, KubeClient, Taint, WorkloadKind
from dsx.sim import nodes as sim_nodes

pytestmark = pytest.mark.integration


def _pod(name: str, namespace: str, node: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
    }


def _phase(client: KubeClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    return client.wait_for(
        lambda: client.get_pod(namespace, name),
        lambda p: p.get("status", {}).get("phase") == phase,
        what=f"pod {namespace}/{name} {phase}",
        timeout_seconds=30,
    )


def _gone(client: KubeClient, namespace: str, name: str) -> None:
    def absent() -> dict[str, Any]:
        try:
            client.get_pod(namespace, name)
        except errors.NotFoundError:
            return {"gone": True}
        return {}

    client.wait_for(absent, bool, what=f"pod {namespace}/{name} deleted", timeout_seconds=30)


def test_server_version_is_the_built_kubernetes(kube_client: KubeClient) -> None:
    version = kube_client.server_version()
    assert version["gitVersion"].startswith("v1.")
    assert (int(version["major"]), int(version["minor"].rstrip("+"))) >= (1, 34)


def test_list_nodes_filters_by_label_selector(kube_client: KubeClient, sim_cluster: Any) -> None:
    every = kube_client.list_nodes({sim_nodes.CLUSTER_LABEL: sim_cluster.name})
    assert sorted(n["metadata"]["name"] for n in every) == sorted(sim_cluster.node_names)
    rack0 = kube_client.list_nodes({sim_nodes.CLUSTER_LABEL: sim_cluster.name, sim_nodes.RACK_LABEL: "rack-00"})
    assert sorted(n["metadata"]["name"] for n in rack0) == sorted(sim_cluster.node_names[:4])
    assert kube_client.list_nodes({sim_nodes.RACK_LABEL: "rack-99"}) == []


def test_cordon_and_uncordon_are_idempotent(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[5]
    try:
        assert kube_client.cordon(node) is True
        assert kube_client.get_node(node)["spec"]["unschedulable"] is True
        assert kube_client.cordon(node) is False
        assert kube_client.get_node(node)["spec"]["unschedulable"] is True
    finally:
        assert kube_client.uncordon(node) is True
    assert kube_client.uncordon(node) is False
    assert not kube_client.get_node(node)["spec"].get("unschedulable")


def test_taint_and_untaint_are_idempotent(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[4]
    taint = Taint("dsx.run/quarantine", "NoSchedule", "xid-79")

    def ours() -> list[dict[str, Any]]:
        return [t for t in kube_client.get_node(node)["spec"].get("taints") or [] if t["key"] == taint.key]

    assert kube_client.taint(node, taint) is True
    assert kube_client.taint(node, taint) is False
    assert ours() == [{"key": "dsx.run/quarantine", "value": "xid-79", "effect": "NoSchedule"}]
    assert kube_client.taint(node, Taint("dsx.run/quarantine", "NoSchedule", "xid-48")) is True
    assert [t["value"] for t in ours()] == ["xid-48"]
    assert kube_client.untaint(node, taint.key) is True
    assert kube_client.untaint(node, taint.key) is False
    assert ours() == []
    with pytest.raises(errors.BadInputError, match="effect"):
        kube_client.taint(node, Taint("k", "Sometimes"))


def test_label_and_annotate_set_and_remove(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[3]
    kube_client.label_node(node, {"dsx.run/state": "quarantined"})
    kube_client.annotate_node(node, {"dsx.run/reason": "xid 79"})
    meta = kube_client.get_node(node)["metadata"]
    assert meta["labels"]["dsx.run/state"] == "quarantined"
    assert meta["annotations"]["dsx.run/reason"] == "xid 79"
    kube_client.label_node(node, {"dsx.run/state": None})
    kube_client.annotate_node(node, {"dsx.run/reason": None})
    meta = kube_client.get_node(node)["metadata"]
    assert "dsx.run/state" not in meta["labels"]
    assert "dsx.run/reason" not in meta.get("annotations", {})


def test_set_node_condition_keeps_the_kubelet_conditions(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[2]
    kube_client.set_node_condition(node, "GpuHealthy", "False", reason="XidCritical", message="xid 79 on GPU 0")
    first = {c["type"]: c for c in kube_client.get_node(node)["status"]["conditions"]}
    assert first["GpuHealthy"]["status"] == "False"
    assert first["GpuHealthy"]["reason"] == "XidCritical"
    assert first["Ready"]["status"] == "True"
    kube_client.set_node_condition(node, "GpuHealthy", "False", reason="XidCritical", message="again")
    again = {c["type"]: c for c in kube_client.get_node(node)["status"]["conditions"]}
    assert again["GpuHealthy"]["lastTransitionTime"] == first["GpuHealthy"]["lastTransitionTime"]
    kube_client.set_node_condition(node, "GpuHealthy", "True", reason="GpuHealthy")
    assert {c["type"]: c["status"] for c in kube_client.get_node(node)["status"]["conditions"]}["GpuHealthy"] == "True"
    with pytest.raises(errors.BadInputError):
        kube_client.set_node_condition(node, "GpuHealthy", "Maybe")


def test_pods_on_a_node_use_a_field_selector(kube_client: KubeClient, sim_namespace: str, sim_cluster: Any) -> None:
    first, second = sim_cluster.node_names[0], sim_cluster.node_names[1]
    kube_client.create_pod(_pod("on-first", sim_namespace, first))
    kube_client.create_pod(_pod("on-second", sim_namespace, second, {"app": "x"}))
    _phase(kube_client, sim_namespace, "on-first", "Running")
    names = [
        p["metadata"]["name"] for p in kube_client.pods_on_node(first) if p["metadata"]["namespace"] == sim_namespace
    ]
    assert names == ["on-first"]
    labelled = kube_client.list_pods(sim_namespace, labels={"app": "x"})
    assert [p["metadata"]["name"] for p in labelled] == ["on-second"]
    assert kube_client.delete_pod(sim_namespace, "on-first") is True
    _gone(kube_client, sim_namespace, "on-first")
    assert kube_client.delete_pod(sim_namespace, "on-first") is False


def _guarded_deployment(client: KubeClient, namespace: str, pdb: dict[str, Any]) -> str:
    """A 1-replica Deployment with a PDB; returns its running pod once the PDB is computed."""
    client.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "guarded", "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "guarded"}},
                "template": {
                    "metadata": {"labels": {"app": "guarded"}},
                    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                },
            },
        }
    )
    client.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": "guarded"}}, **pdb},
        }
    )
    client.wait_for(
        lambda: client.get("policy/v1", "PodDisruptionBudget", "guarded", namespace),
        lambda b: (
            b.get("status", {}).get("currentHealthy") == 1
            and b["status"].get("observedGeneration") == b["metadata"]["generation"]
        ),
        what="PodDisruptionBudget computed",
        timeout_seconds=60,
    )
    return str(client.list_pods(namespace, labels={"app": "guarded"})[0]["metadata"]["name"])


def test_eviction_blocked_by_a_pdb_is_reported_blocked(kube_client: KubeClient, sim_namespace: str) -> None:
    pod = _guarded_deployment(kube_client, sim_namespace, {"minAvailable": 1})
    result = kube_client.evict(sim_namespace, pod, timeout_seconds=2.0, backoff_seconds=0.25)
    assert result.outcome is EvictionOutcome.BLOCKED
    assert result.blocked
    assert result.attempts >= 3
    assert "disruption budget" in result.message
    still = kube_client.get_pod(sim_namespace, pod)
    assert still["status"]["phase"] == "Running"
    assert "deletionTimestamp" not in still["metadata"]


def test_eviction_allowed_by_a_pdb_evicts(kube_client: KubeClient, sim_namespace: str) -> None:
    pod = _guarded_deployment(kube_client, sim_namespace, {"maxUnavailable": 1})
    result = kube_client.evict(sim_namespace, pod, timeout_seconds=10.0)
    assert result.outcome is EvictionOutcome.EVICTED
    assert result.attempts == 1
    _gone(kube_client, sim_namespace, pod)
    assert kube_client.evict(sim_namespace, pod).outcome is EvictionOutcome.ALREADY_GONE


def test_job_runs_to_completion_and_is_deleted(kube_client: KubeClient, sim_namespace: str) -> None:
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once", "namespace": sim_namespace},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "busybox"}]}},
        },
    }
    kube_client.create_job(manifest)
    job = kube_client.wait_for(
        lambda: kube_client.get("batch/v1", "Job", "once", sim_namespace),
        lambda j: j.get("status", {}).get("succeeded") == 1,
        what="job succeeded",
    )
    assert job["status"]["succeeded"] == 1
    with pytest.raises(errors.ConflictError):
        kube_client.create_job(manifest)
    assert kube_client.delete_job(sim_namespace, "once") is True
    kube_client.wait_for(
        lambda: {"left": len(kube_client.list_pods(sim_namespace, labels={"job-name": "once"}))},
        lambda d: d["left"] == 0,
        what="job pods deleted",
    )
    assert kube_client.delete_job(sim_namespace, "once") is False


def test_server_side_apply_converges_and_guards_ownership(
    kube_client: KubeClient, sim_namespace: str, sim_cluster: Any
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": sim_namespace},
        "data": {"mode": "on", "size": "1"},
    }
    created = kube_client.apply(config)
    again = kube_client.apply(config)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert again["data"] == {"mode": "on", "size": "1"}
    with KubeClient(sim_cluster.kubeconfig, field_manager="someone-else") as other:
        with pytest.raises(errors.ConflictError, match="conflict"):
            other.apply({**config, "data": {"mode": "off"}})
        forced = other.apply({**config, "data": {"mode": "off"}}, force=True)
    assert forced["data"]["mode"] == "off"
    dry = kube_client.apply({**config, "data": {"mode": "dry", "size": "1"}}, force=True, dry_run=True)
    assert dry["data"]["mode"] == "dry"
    assert kube_client.get("v1", "ConfigMap", "settings", sim_namespace)["data"]["mode"] == "off"
    patched = kube_client.patch("v1", "ConfigMap", "settings", {"data": {"size": "2"}}, sim_namespace)
    assert patched["data"] == {"mode": "off", "size": "2"}


def _rolled_out(client: KubeClient, kind: WorkloadKind, namespace: str, name: str) -> Any:
    deadline_status = client.wait_for(
        lambda: {"s": client.workload_status(kind, namespace, name)},
        lambda d: d["s"].rolled_out,
        what=f"{kind} {name} rolled out",
        timeout_seconds=60,
    )
    return deadline_status["s"]


def test_workload_status_of_deployment_daemonset_statefulset(
    kube_client: KubeClient, sim_namespace: str, sim_cluster: Any
) -> None:
    template = {
        "metadata": {"labels": {"app": "w"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    selector = {"matchLabels": {"app": "w"}}
    kube_client.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "w", "namespace": sim_namespace},
            "spec": {"replicas": 2, "selector": selector, "template": template},
        }
    )
    kube_client.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "w", "namespace": sim_namespace},
            "spec": {"selector": selector, "template": template},
        }
    )
    kube_client.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "w", "namespace": sim_namespace},
            "spec": {"replicas": 2, "serviceName": "w", "selector": selector, "template": template},
        }
    )
    deployment = _rolled_out(kube_client, WorkloadKind.DEPLOYMENT, sim_namespace, "w")
    assert (deployment.desired, deployment.ready) == (2, 2)
    daemonset = _rolled_out(kube_client, WorkloadKind.DAEMONSET, sim_namespace, "w")
    assert daemonset.desired == len(sim_cluster.node_names)
    statefulset = _rolled_out(kube_client, "StatefulSet", sim_namespace, "w")
    assert statefulset.ready == 2
    kube_client.patch("apps/v1", "Deployment", "w", {"spec": {"replicas": 3}}, sim_namespace)
    assert not kube_client.workload_status(WorkloadKind.DEPLOYMENT, sim_namespace, "w").rolled_out
    with pytest.raises(ValueError):
        kube_client.workload_status("ReplicaSet", sim_namespace, "w")


def test_custom_resources_and_secrets_are_read_generically(kube_client: KubeClient, sim_namespace: str) -> None:
    kube_client.create_crd(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.test.dsx.run"},
            "spec": {
                "group": "test.dsx.run",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }
    )
    for name, size in (("small", 1), ("large", 9)):
        kube_client.create(
            {
                "apiVersion": "test.dsx.run/v1",
                "kind": "Widget",
                "metadata": {"name": name, "namespace": sim_namespace, "labels": {"size": str(size)}},
                "spec": {"size": size},
            }
        )
    assert kube_client.get("test.dsx.run/v1", "Widget", "large", sim_namespace)["spec"] == {"size": 9}
    listed = kube_client.list("test.dsx.run/v1", "Widget", sim_namespace, labels={"size": "1"})
    assert [w["metadata"]["name"] for w in listed] == ["small"]
    with pytest.raises(errors.NotFoundError, match="Gadget"):
        kube_client.list("test.dsx.run/v1", "Gadget", sim_namespace)

    kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": sim_namespace},
            "stringData": {"token": "s3cret"},
        }
    )
    assert kube_client.secret_values(sim_namespace, "creds") == {"token": b"s3cret"}
    secrets = kube_client.list("v1", "Secret", sim_namespace)
    assert "creds" in [s["metadata"]["name"] for s in secrets]


def test_rbac_denial_is_forbidden_exit_4(
    kube_client: KubeClient, sim_namespace: str, tmp_path: Path, sim_cluster: Any
) -> None:
    kube_client.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": sim_namespace}}
    )
    kube_client.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pod-reader", "namespace": sim_namespace},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        }
    )
    kube_client.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": sim_namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": sim_namespace}],
        }
    )
    token = kube_client.service_account_token(sim_namespace, "reader", expiration_seconds=600)
    path = tmp_path / "reader.kubeconfig"
    path.write_text(serialization.dump_yaml(kube_client.kubeconfig_for_token(token)), encoding="utf-8")
    with KubeClient(path) as reader:
        assert reader.list_pods(sim_namespace) == []
        with pytest.raises(errors.ForbiddenError) as denied:
            reader.cordon(sim_cluster.node_names[0])
        assert errors.exit_code_for(denied.value) == 4
        assert "forbidden" in str(denied.value)
        with pytest.raises(errors.ForbiddenError):
            reader.list_nodes()
    path.write_text(serialization.dump_yaml(kube_client.kubeconfig_for_token("not-a-token")), encoding="utf-8")
    with KubeClient(path) as stranger, pytest.raises(errors.UnauthorizedError) as rejected:
        stranger.list_nodes()
    assert type(rejected.value) is errors.UnauthorizedError
    assert errors.exit_code_for(rejected.value) == 4


def test_missing_objects_and_unreachable_servers_map_to_exit_codes(
    kube_client: KubeClient, tmp_path: Path, sim_cluster: Any
) -> None:
    with pytest.raises(errors.NotFoundError) as missing:
        kube_client.get_node("no-such-node")
    assert errors.exit_code_for(missing.value) == 3
    config = documents.load_mapping_file(sim_cluster.kubeconfig)
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # discard port: nothing listens
    path = tmp_path / "unreachable.kubeconfig"
    path.write_text(serialization.dump_yaml(config), encoding="utf-8")
    with KubeClient(path, request_timeout_seconds=3) as nowhere:
        with pytest.raises(errors.UnavailableError) as down:
            nowhere.list_nodes()
        assert nowhere.ready() is False
    assert errors.exit_code_for(down.value) == 6
    assert "127.0.0.1:9" in str(down.value)
    with pytest.raises(errors.NotFoundError):
        KubeClient(tmp_path / "absent.kubeconfig")
