"""Area of concern: the snapshot agents' RBAC (deploy/snapshot-agent) is what the real apiserver
enforces — each service account can do its job and nothing around it — the manifests are
accepted as written, and conformance lists the accounts without flagging them."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.cli.main import main
from dsx.kube.client import KubeClient
from dsx.sim import binaries

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "snapshot-agent"


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


def manifests(namespace: str, suffix: str, *files: str) -> list[dict[str, Any]]:
    """The shipped manifests moved into `namespace`, cluster-scoped names suffixed (the cluster is shared)."""
    text = "".join((DEPLOY / f).read_text() + "\n---\n" for f in files).replace("dsx-system", namespace)
    docs = serialization.parse_yaml_documents(text, source="deploy/snapshot-agent")
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"]["name"] += suffix
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] += suffix
    return docs


@pytest.fixture(scope="module")
def agents(sim_cluster: Any) -> Iterator[tuple[KubeClient, str, list[dict[str, Any]]]]:
    suffix = f"-{uuid.uuid4().hex[:6]}"
    namespace = f"dsx-agents{suffix}"
    docs = manifests(namespace, suffix, "namespace.yaml", "kubeconfig.yaml", "rbac.yaml", "daemonset.yaml")
    with KubeClient(sim_cluster.kubeconfig) as client:
        try:
            for doc in docs:
                client.apply(doc)
            yield client, namespace, docs
        finally:
            for doc in docs:
                if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                    client.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])
            client.delete("v1", "Namespace", namespace)


def allowed(kubeconfig: Path, namespace: str, account: str, verb: str, resource: str, where: str | None) -> bool:
    """`kubectl auth can-i` as the service account: the apiserver's own RBAC decision."""
    kubectl = binaries.resolve(allow_build=False).paths["kubectl"]
    scope = ["--namespace", where] if where else ["--all-namespaces"]
    done = subprocess.run(
        [
            str(kubectl),
            "--kubeconfig",
            str(kubeconfig),
            "auth",
            "can-i",
            verb,
            resource,
            *scope,
            f"--as=system:serviceaccount:{namespace}:{account}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stdout.strip() in ("yes", "no"), done.stderr
    return done.stdout.strip() == "yes"


def test_node_agent_may_only_write_its_configmaps(
    agents: tuple[KubeClient, str, list[dict[str, Any]]], sim_cluster: Any
) -> None:
    _, namespace, _ = agents

    def can(verb: str, resource: str, where: str | None = None) -> bool:
        return allowed(sim_cluster.kubeconfig, namespace, "dsx-snapshot-node", verb, resource, where)

    assert can("create", "configmaps", namespace)
    assert can("patch", "configmaps", namespace)
    assert not can("create", "configmaps", "default")
    assert not can("list", "secrets")
    assert not can("list", "nodes")
    assert not can("delete", "configmaps", namespace)


def test_cluster_collector_reads_but_does_not_write(
    agents: tuple[KubeClient, str, list[dict[str, Any]]], sim_cluster: Any
) -> None:
    _, namespace, _ = agents

    def can(verb: str, resource: str, where: str | None = None) -> bool:
        return allowed(sim_cluster.kubeconfig, namespace, "dsx-snapshot-cluster", verb, resource, where)

    assert can("list", "nodes")
    assert can("list", "secrets")
    assert can("list", "daemonsets.apps")
    assert can("list", "customresourcedefinitions.apiextensions.k8s.io")
    assert can("create", "configmaps", namespace)
    assert not can("get", "secrets", "kube-system")
    assert not can("patch", "nodes")
    assert not can("delete", "pods", namespace)
    assert not can("create", "configmaps", "default")


def test_daemonset_is_accepted_and_lands_on_every_node(
    agents: tuple[KubeClient, str, list[dict[str, Any]]], sim_cluster: Any
) -> None:
    client, namespace, _ = agents
    client.wait_for(
        lambda: client.get("apps/v1", "DaemonSet", "dsx-snapshot-node", namespace),
        lambda ds: (ds.get("status") or {}).get("desiredNumberScheduled") == len(sim_cluster.node_names),
        what="the node agent scheduled on every node",
        timeout_seconds=60,
    )


def test_conformance_lists_the_agents_and_does_not_flag_them(
    agents: tuple[KubeClient, str, list[dict[str, Any]]], sim_cluster: Any, tmp_path: Path, recipe_path: Path
) -> None:
    _, namespace, _ = agents
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", str(sim_cluster.kubeconfig)]
    dsx(*args, "--phase", "conformance", "--output", str(report))
    tests = {t["name"]: t for t in json.loads(report.read_text())["results"]["tests"]}
    check = tests["conformance/dsx-not-cluster-admin"]
    assert check["status"] == "passed", check["message"]
    accounts = check["extra"]["evidence"]["serviceAccounts"]
    assert f"{namespace}/dsx-snapshot-cluster" in accounts and f"{namespace}/dsx-snapshot-node" in accounts


def test_cluster_admin_binding_for_a_dsx_account_is_flagged(
    agents: tuple[KubeClient, str, list[dict[str, Any]]], sim_cluster: Any, tmp_path: Path, recipe_path: Path
) -> None:
    client, namespace, _ = agents
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{namespace}-too-much"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "dsx-snapshot-node", "namespace": namespace}],
    }
    client.apply(binding)
    try:
        report = tmp_path / "report.json"
        args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", str(sim_cluster.kubeconfig)]
        assert dsx(*args, "--phase", "conformance", "--fail-on-error", "--output", str(report)) == 1
        tests = {t["name"]: t for t in json.loads(report.read_text())["results"]["tests"]}
        assert tests["conformance/dsx-not-cluster-admin"]["message"] == (
            f"ClusterRoleBinding {namespace}-too-much gives {namespace}/dsx-snapshot-node ClusterRole cluster-admin"
        )
    finally:
        client.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", f"{namespace}-too-much")


@pytest.fixture
def recipe_path(tmp_path: Path) -> Path:
    """A recipe with no components: conformance needs only its criteria."""
    doc = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {
            "name": "conformance-only",
            "generator": "dsx/test",
            "criteria": {"service": "eks", "accelerator": "h100"},
            "overlays": ["base"],
            "unvalidatedCriteria": [],
        },
        "constraints": [],
        "componentRefs": [],
        "deploymentOrder": [],
    }
    path = tmp_path / "r.yaml"
    path.write_text(serialization.dump_yaml(doc))
    return path
