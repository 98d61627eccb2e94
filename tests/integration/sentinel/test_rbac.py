"""Area of concern: the sentinel's RBAC (deploy/sentinel) is what the real apiserver enforces — its
service account can make every call the pipeline makes (run through the real adapter with the
account's own token), nothing around them is allowed (access reviews), the granted rules are
exactly the documented ones, the monitor account has no API access, and every shipped manifest
is accepted by the apiserver (server-side dry run)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightkube
import pytest
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectRulesReviewSpec, SubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectRulesReview, SubjectAccessReview

from dsx import serialization
from dsx.certify.executor import WorkloadRun
from dsx.controllers.kube_nodes import KubeNodeOps
from dsx.errors import ForbiddenError
from dsx.executors import kubernetes
from dsx.files import documents
from dsx.health.decisions import nodes
from dsx.health.decisions import policy as policy_module
from dsx.health.decisions.ports import EvictionOutcome, NodeChange, Taint
from dsx.kube.client import KubeClient
from dsx.kube.jobs import RunLauncher
from dsx.kube.leader import ElectionSettings, LeaderElector
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "sentinel"
SENTINEL = "dsx-sentinel"
MONITOR = "dsx-sentinel-monitor"
REQUIRED = {
    ("", "nodes", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "nodes", "patch"),
    ("", "nodes/status", "patch"),  # the DsxGpuHealthy condition
    ("", "pods", "list"),
    ("", "pods/eviction", "create"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"),  # resourceNames: TrainJob's and JobSet's
    ("authentication.k8s.io", "tokenreviews", "create"),  # the monitors' pod-bound tokens
}
"""Cluster-wide; plus events create in namespace default, leases create (and get/update of its own
Lease) in its own namespace, the certification runs' rules in dsx-runs, and pod deletion only where
the chart binds it (rbac.podDeleteNamespaces, the policy's DeleteAfterTimeout namespaces)."""
RUNS = "dsx-runs"
CHART = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "dsx-sentinel"


def manifests(namespace: str, suffix: str, *files: str) -> list[dict[str, Any]]:
    """The shipped manifests moved into `namespace`, every cluster- or default-scoped name suffixed."""
    return _moved("".join((DEPLOY / f).read_text() + "\n---\n" for f in files), namespace, suffix)


def pod_deletion_binding(helm_binary: Path, namespace: str, suffix: str) -> dict[str, Any]:
    """The RoleBinding the chart renders for `rbac.podDeleteNamespaces={namespace}`, moved like the rest."""
    argv = [str(helm_binary), "template", SENTINEL, str(CHART), "--namespace", "dsx-system"]
    argv += ["--show-only", "templates/rbac.yaml", "--set", f"rbac.podDeleteNamespaces={{{namespace}}}"]
    rendered = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120).stdout
    (binding,) = [
        d
        for d in _moved(rendered, namespace, suffix)
        if d["kind"] == "RoleBinding" and d["metadata"]["name"] == f"{SENTINEL}-pod-deletion{suffix}"
    ]
    return binding


def _moved(text: str, namespace: str, suffix: str) -> list[dict[str, Any]]:
    docs = serialization.parse_yaml_documents(text.replace("dsx-system", namespace), source="deploy/sentinel")
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            doc["metadata"]["name"] += suffix
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            doc["roleRef"]["name"] += suffix
    return docs


@pytest.fixture(scope="module")
def account(
    sim_cluster: Any, helm_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KubeClient, KubeClient, str, Any]]:
    """(admin client, client with the sentinel account's own token, namespace, kubeconfigs). Pods may
    be deleted in the sentinel's own namespace, as `rbac.podDeleteNamespaces` would grant it."""
    suffix = f"-{uuid.uuid4().hex[:6]}"
    namespace = f"dsx-sentinel{suffix}"
    home = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}  # helm --create-namespace
    docs = [home, *manifests(namespace, suffix, "namespace.yaml", "rbac.yaml", "policy.yaml")]
    docs.append(pod_deletion_binding(helm_binary, namespace, suffix))
    with KubeClient(sim_cluster.kubeconfig) as admin:
        try:
            for doc in docs:
                admin.apply(doc)
            token = admin.service_account_token(namespace, SENTINEL, expiration_seconds=3600)
            kubeconfig = tmp_path_factory.mktemp("sentinel-rbac") / "kubeconfig"
            kubeconfig.write_text(serialization.dump_yaml(admin.kubeconfig_for_token(token)))
            with KubeClient(kubeconfig) as own:
                yield admin, own, namespace, {"admin": sim_cluster.kubeconfig, "own": kubeconfig}
        finally:
            for doc in reversed(docs):
                if doc["kind"] != "Namespace":
                    admin.delete(
                        doc["apiVersion"], doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")
                    )
            admin.delete("v1", "Namespace", namespace)


def reviewer(kubeconfig: Path) -> lightkube.Client:
    """Access reviews must carry empty metadata, which KubeClient.create (name required) cannot send."""
    return lightkube.Client(KubeConfig.from_file(kubeconfig))


def allowed(client: lightkube.Client, home: str, account_name: str, verb: str, resource: str, **where: str) -> bool:
    """May the service account `home/account_name` do this? (`resource` may name a subresource: pods/eviction)."""
    resource, _, subresource = resource.partition("/")
    review = SubjectAccessReview(
        spec=SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{home}:{account_name}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{home}", "system:authenticated"],
            resourceAttributes=ResourceAttributes(
                verb=verb, resource=resource, subresource=subresource or None, **where
            ),
        )
    )
    status = client.create(review).status
    return bool(status and status.allowed)


def plain_node(name: str) -> dict[str, Any]:
    """A Node no kubelet (and no kwok) manages: the shared simulated nodes stay untouched."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"dsx-test/rbac": "true"}}}


def bound_pod(namespace: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


def test_the_account_can_make_every_call_the_pipeline_makes(account) -> None:
    admin, own, namespace, _ = account
    node_name = f"rbac-{namespace}"
    admin.create(plain_node(node_name))
    try:
        admin.create(bound_pod(namespace, "evict-me", node_name))
        admin.create(bound_pod(namespace, "delete-me", node_name))
        ops = KubeNodeOps(own)
        assert nodes.name(ops.get_node(node_name)) == node_name
        assert [nodes.name(n) for n in ops.list_nodes({"dsx-test/rbac": "true"})] == [node_name]
        watch = own.watch_nodes({"dsx-test/rbac": "true"})
        assert [nodes.name(n) for n in watch.sync()] == [node_name]
        change = NodeChange(
            unschedulable=True,
            labels={"sentinel.dsx.run/state": "quarantined"},
            annotations={"sentinel.dsx.run/reason": "rbac test"},
            add_taints=(Taint("sentinel.dsx.run/quarantined"),),
        )
        after = ops.change_node(node_name, change)
        assert nodes.unschedulable(after) and nodes.has_taint(after, "sentinel.dsx.run/quarantined")
        assert sorted(nodes.name(p) for p in ops.list_pods(node_name)) == ["delete-me", "evict-me"]
        assert ops.evict(namespace, "evict-me", grace_period_seconds=0) is EvictionOutcome.EVICTED
        assert ops.delete_pod(namespace, "delete-me", grace_period_seconds=0) is True
        ops.record_event(node_name, "RbacTest", "the sentinel account may record events on nodes")
        assert own.ready()
        elector = LeaderElector(
            own,
            ElectionSettings(namespace=namespace, identity="rbac-test"),
            on_started_leading=lambda: None,
            on_stopped_leading=lambda: None,
        )
        assert elector.try_acquire_or_renew() and elector.try_acquire_or_renew()  # create, then get + update

        # re-certification: the engine is asked for, then a TrainJob pinned to the node and the
        # certification's runtime copy are applied, read and deleted by label
        from dsx.kube import certify_jobs

        assert certify_jobs.choose_engine(own, gang="none").engine is kubernetes.Engine.TRAINER
        launcher = RunLauncher(own, namespace=RUNS, manage_namespace=False)  # the chart's, Pod Security labelled
        category = catalog.get("nccl-loopback")
        run = WorkloadRun(
            "nccl-loopback/rbac", category, (node_name,), 1, model.Timeouts(60, 60), program=category.program
        )
        certification = namespace[-6:]
        executor = kubernetes.KubernetesExecutor(launcher, [], certification_id=certification)
        launcher.apply(executor.runtimes_for([run]))
        name = f"dsx-{certification}-1"
        launcher.create(name, executor.render(run, name))
        found = own.list("trainer.kubeflow.org/v1alpha1", "TrainJob", RUNS, labels={"dsx.run/run": name})
        assert [t["metadata"]["name"] for t in found] == [name]
        launcher.pods(name)
        launcher.delete(name)
        assert own.list("trainer.kubeflow.org/v1alpha1", "TrainJob", RUNS, labels={"dsx.run/run": name}) == []
        launcher.delete_labelled(
            {kubernetes.CERTIFICATION_LABEL: certification}, [("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")]
        )
    finally:
        admin.delete("v1", "Node", node_name)


def test_nothing_around_those_calls_is_allowed(account) -> None:
    _, own, namespace, kubeconfigs = account
    admin = reviewer(kubeconfigs["admin"])
    denied = [
        ("delete", "nodes", {}),
        ("create", "nodes", {}),
        ("update", "nodes", {}),
        ("update", "nodes/status", {}),
        ("get", "pods", {"namespace": namespace}),
        ("delete", "pods", {"namespace": "kube-system"}),
        ("delete", "pods", {"namespace": "default"}),
        ("delete", "pods", {}),
        ("create", "pods", {"namespace": namespace}),
        ("patch", "pods", {"namespace": namespace}),
        ("create", "pods/exec", {"namespace": namespace}),
        ("list", "secrets", {}),
        ("get", "secrets", {"namespace": "kube-system"}),
        ("list", "configmaps", {"namespace": namespace}),
        ("create", "events", {"namespace": "kube-system"}),
        ("delete", "events", {"namespace": "default"}),
        ("list", "namespaces", {}),
        ("create", "clusterrolebindings", {"group": "rbac.authorization.k8s.io"}),
        ("delete", "deployments", {"group": "apps", "namespace": namespace}),
        ("create", "leases", {"group": "coordination.k8s.io", "namespace": "default"}),
        ("update", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system"}),
        ("delete", "leases", {"group": "coordination.k8s.io", "namespace": namespace}),
        ("get", "leases", {"group": "coordination.k8s.io", "namespace": namespace, "name": "kube-scheduler"}),
        ("update", "leases", {"group": "coordination.k8s.io", "namespace": namespace, "name": "kube-scheduler"}),
        ("list", "leases", {"group": "coordination.k8s.io", "namespace": namespace}),
        ("patch", "namespaces", {"name": "kube-system"}),
        ("delete", "namespaces", {"name": RUNS}),
        ("patch", "namespaces", {"name": RUNS}),  # its Pod Security labels stay the chart's
        ("update", "namespaces", {"name": RUNS}),
        ("patch", "jobs", {"group": "batch", "namespace": namespace}),
        ("get", "pods/log", {"namespace": namespace}),
        ("create", "pods", {"namespace": RUNS}),
        ("list", "secrets", {"namespace": RUNS}),
        ("get", "customresourcedefinitions", {"group": "apiextensions.k8s.io", "name": "leases.coordination.k8s.io"}),
        ("list", "customresourcedefinitions", {"group": "apiextensions.k8s.io"}),
        ("create", "trainjobs", {"group": "trainer.kubeflow.org", "namespace": namespace}),
        ("create", "clustertrainingruntimes", {"group": "trainer.kubeflow.org"}),
        ("list", "events", {"namespace": namespace}),
    ]
    leaks = [
        (verb, resource, where)
        for verb, resource, where in denied
        if allowed(admin, namespace, SENTINEL, verb, resource, **where)
    ]
    assert leaks == []
    assert allowed(admin, namespace, SENTINEL, "create", "events", namespace="default")
    assert allowed(admin, namespace, SENTINEL, "delete", "pods", namespace=namespace)
    assert allowed(admin, namespace, SENTINEL, "delete", "pods", namespace=RUNS)  # a run's cleanup
    lease = {"group": "coordination.k8s.io", "namespace": namespace, "name": SENTINEL}
    assert allowed(admin, namespace, SENTINEL, "update", "leases", **lease)
    assert allowed(admin, namespace, SENTINEL, "get", "pods/log", namespace=RUNS)
    assert allowed(admin, namespace, SENTINEL, "create", "trainjobs", group="trainer.kubeflow.org", namespace=RUNS)
    with pytest.raises(ForbiddenError):
        own.list("v1", "Secret", "kube-system")
    with pytest.raises(ForbiddenError):
        own.delete("v1", "Node", "gpu-node-00")


def test_the_granted_rules_are_exactly_the_documented_ones(account) -> None:
    _, _, _, kubeconfigs = account
    review = reviewer(kubeconfigs["own"]).create(
        SelfSubjectRulesReview(spec=SelfSubjectRulesReviewSpec(namespace="default"))
    )
    assert review.status is not None
    granted = {
        (group, resource, verb)
        for rule in review.status.resourceRules
        for group in rule.apiGroups or []
        for resource in rule.resources or []
        for verb in rule.verbs
    }
    # what every authenticated identity may do (self reviews) is not the sentinel's grant
    everyone = {g for g in granted if g[0] in ("authorization.k8s.io", "authentication.k8s.io") and "self" in g[1]}
    # in default: Events on nodes written, and node-problem-detector's read (monitors.nodeEventsNamespace)
    assert granted - everyone == REQUIRED | {("", "events", "create"), ("", "events", "list"), ("", "events", "watch")}


def test_the_monitor_account_has_no_api_access(account) -> None:
    _, _, namespace, kubeconfigs = account
    admin = reviewer(kubeconfigs["admin"])
    for verb, resource in (("list", "nodes"), ("create", "events"), ("get", "pods"), ("create", "pods/eviction")):
        assert not allowed(admin, namespace, MONITOR, verb, resource, namespace="default")
    monitor = next(d for d in manifests(namespace, "", "rbac.yaml") if d["metadata"]["name"] == MONITOR)
    assert monitor["automountServiceAccountToken"] is False


def test_every_shipped_manifest_is_accepted_and_the_policy_loads(account) -> None:
    admin, _, namespace, _ = account
    for doc in manifests(namespace, "-dry", "deployment.yaml", "monitor-daemonset.yaml"):
        admin.apply(doc, dry_run=True)
    (config_map,) = manifests(namespace, "", "policy.yaml")
    document = serialization.parse_yaml(config_map["data"]["policy.yaml"], source="policy ConfigMap")
    shipped = policy_module.from_dict(document, source="deploy/sentinel/policy.yaml")
    default = policy_module.from_dict(documents.load_mapping_file(policy_module.DEFAULT_PATH), source="x")
    assert [r.name for r in shipped.quarantine.rule_sets] == [r.name for r in default.quarantine.rule_sets]
    assert not any(shipped.switch(s).enabled for s in policy_module.CLUSTER_CHANGING)
