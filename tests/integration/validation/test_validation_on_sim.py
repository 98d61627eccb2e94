"""Area of concern: snapshot, validate and diff against a real kube-apiserver (dsx sim).

The eks/h100/ubuntu/training/kubeflow recipe is resolved by the real engine and moved into
namespaces of this module's own (`dsxv-…`), then "installed" the way a cluster would show it:
Helm release Secrets in Helm's storage format, and Deployments, StatefulSets and DaemonSets
whose pods kwok runs on the simulated GPU nodes, plus the CRDs the asserts name. A Lease assert
is held the way the component holds it, by dsx's leader elector against the real apiserver.
Failures are made the way they happen: the Lease released, a container in CrashLoopBackOff
(kwok stage annotation), a release upgraded to the wrong chart version, one node's driver label
changing. Everything changed is
put back; namespaces and CRDs created here are deleted at the end.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.cli.main import main
from dsx.files import documents
from dsx.kube import leader
from dsx.kube.client import KubeClient
from dsx.model import recipe as recipe_model
from dsx.validation import helm_storage, results, run
from dsx.validation import reading as validation_reading

pytestmark = pytest.mark.integration

CRITERIA = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]
CRITERIA += ["--platform", "kubeflow"]
DRIVER_LABEL = "nvidia.com/cuda.driver.major"
WAITING_ANNOTATION = "sim.dsx.run/waiting-reason"
INSTALL_TIMEOUT_SECONDS = 180


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


def owned_recipe(source: Path, prefix: str, target: Path) -> recipe_model.Recipe:
    """The resolved recipe with every namespace moved under `prefix`, re-digested."""
    doc = documents.load_mapping_file(source)
    for ref in doc["componentRefs"]:
        ref["namespace"] = prefix + ref["namespace"]
        for check in ref["healthCheckAsserts"]:
            if check.get("namespace"):
                check["namespace"] = prefix + check["namespace"]
    doc["metadata"].pop("digest", None)
    owned = recipe_model.Recipe.from_dict(doc, source=str(target)).with_digest()
    target.write_text(serialization.dump_yaml(owned.to_dict()))
    return documents.recipe(str(target))


def pod_template(name: str, image: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": name}, "annotations": annotations or {}},
        "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "main", "image": image}]},
    }


def workload(kind: str, namespace: str, name: str, image: str, annotations: dict[str, str] | None = None) -> dict:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": pod_template(name, image, annotations),
    }
    if kind != "DaemonSet":
        spec["replicas"] = 1
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def crd(name: str) -> dict[str, Any]:
    plural, group = name.split(".", 1)
    kind = "ClusterPolicy" if name == "clusterpolicies.nvidia.com" else plural.removesuffix("s").capitalize()
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "names": {"plural": plural, "singular": plural.removesuffix("s"), "kind": kind},
            "scope": "Cluster" if plural.startswith("cluster") else "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


class Installation:
    """What this module put into the shared cluster, so it can take it out again."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.namespaces: set[str] = set()
        self.crds: list[str] = []
        self.electors: list[tuple[leader.LeaderElector, threading.Event, threading.Thread]] = []
        self.leases: list[tuple[str, str]] = []

    def namespace(self, name: str) -> None:
        if name not in self.namespaces:
            self.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            self.namespaces.add(name)

    def ensure_crd(self, name: str) -> None:
        existing = {
            c["metadata"]["name"] for c in self.client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        }
        if name not in existing:
            self.client.create_crd(crd(name))
            self.crds.append(name)

    def install(self, target: recipe_model.Recipe) -> None:
        for component in target.component_refs:
            self.namespace(component.namespace)
            image = f"registry.invalid/dsx-fixture/{component.name}:{component.version}"
            if component.type is recipe_model.ComponentType.HELM:
                record = helm_storage.build_release(
                    name=component.name,
                    namespace=component.namespace,
                    chart=component.chart,
                    version=component.version,
                    values=component.values,
                )
                self.client.apply(helm_storage.encode_secret(record))
            runs_something = False
            for check in component.health_check_asserts:
                kind = check.kind.value
                if kind == "CustomResourceDefinition":
                    self.ensure_crd(check.name)
                elif kind in ("Deployment", "StatefulSet", "DaemonSet"):
                    self.namespace(check.namespace)
                    self.client.apply(workload(kind, check.namespace, check.name, image))
                    runs_something = True
                elif kind == "Lease":
                    self.hold_lease(check.namespace, check.name)
            needs_pods = any(c.kind.value == "Pod" for c in component.health_check_asserts)
            crd_only = component.health_check_asserts and all(
                c.kind.value == "CustomResourceDefinition" for c in component.health_check_asserts
            )
            if not runs_something and (needs_pods or not crd_only):
                self.client.apply(workload("Deployment", component.namespace, component.name, image))

    def hold_lease(self, namespace: str, name: str) -> None:
        """Take and keep renewing the Lease, as the component's leader would."""
        settings = leader.ElectionSettings(namespace=namespace, name=name, identity=f"{name}-fixture")
        elected = threading.Event()
        elector = leader.LeaderElector(
            self.client, settings, on_started_leading=elected.set, on_stopped_leading=lambda: None
        )
        stop = threading.Event()
        thread = threading.Thread(target=elector.run, args=(stop,), name=f"lease-{name}", daemon=True)
        thread.start()
        assert elected.wait(30), f"the fixture could not take Lease {namespace}/{name}"
        self.electors.append((elector, stop, thread))
        self.leases.append((namespace, name))

    def release_leases(self) -> list[tuple[str, str]]:
        """Stop renewing and release every Lease held (as a leader that exits does); which they were."""
        for elector, stop, thread in self.electors:
            stop.set()
            thread.join(10)
            elector.release()
        self.electors.clear()
        released, self.leases = self.leases, []
        return released

    def remove(self) -> None:
        self.release_leases()
        for name in sorted(self.namespaces):
            self.client.delete("v1", "Namespace", name)
        for name in self.crds:
            self.client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)


def deployment_report(target: recipe_model.Recipe, client: KubeClient) -> results.Report:
    from dsx.validation import cluster_snapshot

    reader: validation_reading.ClusterReader = client
    snap = cluster_snapshot.collect(reader, generator="dsx/test")
    return run.validate(target, snap, phases=[results.Phase.DEPLOYMENT], reader=reader, generator="dsx/test")


def wait_healthy(target: recipe_model.Recipe, client: KubeClient) -> None:
    deadline = time.monotonic() + INSTALL_TIMEOUT_SECONDS
    while True:
        report = deployment_report(target, client)
        if not report.failed:
            return
        if time.monotonic() > deadline:
            failed = [f"{r.name}: {r.message}" for r in report.results if r.status is results.Status.FAILED]
            pytest.fail("fixture components never became healthy:\n" + "\n".join(failed))
        time.sleep(2)


Installed = tuple[recipe_model.Recipe, Path, Installation]


@pytest.fixture(scope="module")
def client(sim_cluster: Any) -> Iterator[KubeClient]:
    with KubeClient(sim_cluster.kubeconfig) as kube:
        yield kube


@pytest.fixture(scope="module")
def resolved_recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recipe") / "resolved.yaml"
    assert dsx("recipe", *CRITERIA, "-o", str(path)) == 0
    return path


@pytest.fixture(scope="module")
def installed(
    client: KubeClient, resolved_recipe: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    path = tmp_path_factory.mktemp("owned") / "r.yaml"
    target = owned_recipe(resolved_recipe, "dsxv-", path)
    installation = Installation(client)
    try:
        installation.install(target)
        wait_healthy(target, client)
        yield target, path, installation
    finally:
        installation.remove()


@pytest.fixture
def kubeconfig(sim_cluster: Any) -> str:
    return str(sim_cluster.kubeconfig)


def report_tests(path: Path) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in json.loads(path.read_text())["results"]["tests"]}


def test_absent_components_fail_and_are_each_listed(resolved_recipe: Path, kubeconfig: str, tmp_path: Path) -> None:
    target = owned_recipe(resolved_recipe, f"dsxa{uuid.uuid4().hex[:4]}-", tmp_path / "absent.yaml")
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(tmp_path / "absent.yaml"), "--kubeconfig", kubeconfig]
    assert dsx(*args, "--phase", "deployment", "--fail-on-error", "--output", str(report)) == 1
    tests = report_tests(report)
    for component in target.component_refs:
        name = f"deployment/{component.name}/installed"
        if all(c.kind.value == "CustomResourceDefinition" for c in component.health_check_asserts):
            # CRDs only (skyhook-customizations, kubeflow-trainer-runtimes): the CRD assert stands for it
            assert name not in tests
            continue
        assert tests[name]["status"] == "failed", name
        assert "not installed" in tests[name]["message"], tests[name]["message"]


def test_installed_components_pass_deployment(installed: Installed, kubeconfig: str, tmp_path: Path) -> None:
    _, recipe_path, _ = installed
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "deployment"]
    assert dsx(*args, "--fail-on-error", "--output", str(report), "--junit", str(junit)) == 0
    tests = report_tests(report)
    assert tests["deployment/gpu-operator/installed"]["status"] == "passed"
    assert tests["deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset"]["status"] == "passed"
    assert tests["deployment/dsx-sentinel/installed"]["extra"]["evidence"]["image"].endswith(":0.1.0")
    assert 'failures="0"' in junit.read_text()


def test_ready_pods_without_their_leader_fail_deployment_and_exit_1(
    installed: Installed, kubeconfig: str, tmp_path: Path
) -> None:
    """kwok keeps the sentinel's pods Ready; only the released Lease shows that no sentinel runs."""
    target, recipe_path, installation = installed
    namespace = target.component("dsx-sentinel").namespace
    released = installation.release_leases()
    try:
        assert (namespace, "dsx-sentinel") in released
        report = tmp_path / "report.json"
        args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "deployment"]
        assert dsx(*args, "--output", str(report)) == 1  # a failed check exits 1 without being asked
        tests = report_tests(report)
        assert tests["deployment/dsx-sentinel/Deployment/dsx-sentinel"]["status"] == "passed"  # kwok's Ready pods
        lease = tests["deployment/dsx-sentinel/Lease/dsx-sentinel"]
        assert lease["status"] == "failed"
        assert lease["message"] == f"Lease {namespace}/dsx-sentinel: not held (released, or never taken)"
        assert dsx(*args, "--no-fail-on-error", "--output", str(report)) == 0
    finally:
        for lease_namespace, name in released:
            installation.hold_lease(lease_namespace, name)


def test_crashloop_container_fails_deployment_naming_the_pod(
    installed: Installed, client: KubeClient, kubeconfig: str, tmp_path: Path
) -> None:
    target, recipe_path, _ = installed
    namespace = target.component("gpu-operator").namespace
    broken = workload(
        "Deployment",
        namespace,
        "gpu-feature-discovery",
        "registry.invalid/dsx-fixture/gfd:v0.18.0",
        annotations={WAITING_ANNOTATION: "CrashLoopBackOff"},
    )
    client.apply(broken)
    try:
        pod = client.wait_for(
            lambda: next(iter(client.list_pods(namespace, labels={"app": "gpu-feature-discovery"})), {}),
            lambda p: any(
                (s.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
                for s in (p.get("status") or {}).get("containerStatuses") or []
            ),
            what="a CrashLoopBackOff pod",
            timeout_seconds=60,
        )
        assert pod["status"]["phase"] == "Running"  # running, yet not healthy
        report = tmp_path / "report.json"
        args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "deployment"]
        assert dsx(*args, "--fail-on-error", "--output", str(report)) == 1
        check = report_tests(report)[f"deployment/namespace/{namespace}/pods"]
        assert check["status"] == "failed"
        assert f"pod {namespace}/{pod['metadata']['name']}: container main CrashLoopBackOff" in check["message"]
    finally:
        client.delete("apps/v1", "Deployment", "gpu-feature-discovery", namespace)
        client.wait_for(
            lambda: {"pods": client.list_pods(namespace, labels={"app": "gpu-feature-discovery"})},
            lambda found: not found["pods"],
            what="crashing pods gone",
            timeout_seconds=60,
        )


def test_wrong_chart_version_fails_and_drifts(
    installed: Installed, client: KubeClient, kubeconfig: str, tmp_path: Path
) -> None:
    target, recipe_path, _ = installed
    component = target.component("gpu-operator")
    upgrade = helm_storage.build_release(
        name=component.name,
        namespace=component.namespace,
        chart=component.chart,
        version="v25.3.4",
        values=component.values,
        revision=2,
    )
    secret = helm_storage.encode_secret(upgrade)
    client.apply(secret)
    try:
        report = tmp_path / "report.json"
        args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "deployment"]
        assert dsx(*args, "--fail-on-error", "--output", str(report)) == 1
        check = report_tests(report)["deployment/gpu-operator/installed"]
        assert check["status"] == "failed"
        assert "chart gpu-operator v25.3.4" in check["message"] and "recipe pins v25.10.1" in check["message"]
        drift = tmp_path / "drift.json"
        diff = ["diff", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--format", "json", "-o", str(drift)]
        assert dsx(*diff, "--fail-on-drift") == 1
        changes = json.loads(drift.read_text())["changes"]
        assert {"kind": "version", "subject": "gpu-operator", "expected": "v25.10.1", "actual": "v25.3.4"} in changes
    finally:
        client.delete("v1", "Secret", secret["metadata"]["name"], component.namespace)


def test_diff_is_clean_then_catches_one_nodes_driver_label(
    installed: Installed, client: KubeClient, sim_cluster: Any, kubeconfig: str, tmp_path: Path
) -> None:
    _, recipe_path, _ = installed
    out = tmp_path / "drift.json"
    args = ["diff", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--format", "json", "-o", str(out)]
    assert dsx(*args, "--fail-on-drift") == 0, out.read_text()
    node = sim_cluster.node_names[-1]
    original = client.get_node(node)["metadata"]["labels"][DRIVER_LABEL]
    client.label_node(node, {DRIVER_LABEL: str(int(original) - 10)})
    try:
        assert dsx(*args, "--fail-on-drift") == 1
        changes = json.loads(out.read_text())["changes"]
        assert [(c["kind"], c["path"]) for c in changes] == [("pool-label", DRIVER_LABEL)]
        assert changes[0]["actual"] == {str(int(original) - 10): [node]}
        assert changes[0]["expected"] == original
    finally:
        client.label_node(node, {DRIVER_LABEL: original})
    assert dsx(*args, "--fail-on-drift") == 0


def test_snapshot_lists_gpu_nodes_and_recipe_derives_h100(
    installed: Installed, client: KubeClient, sim_cluster: Any, kubeconfig: str, tmp_path: Path
) -> None:
    target, _, _ = installed
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "dsxv-cluster-policy"}}
    policy["spec"] = {"driver": {"enabled": True, "version": "580.105.08"}}
    client.apply(policy)
    try:
        path = tmp_path / "s.yaml"
        assert dsx("snapshot", "--kubeconfig", kubeconfig, "-o", str(path)) == 0
    finally:
        client.delete("nvidia.com/v1", "ClusterPolicy", "dsxv-cluster-policy")
    snap = documents.snapshot_file(str(path))
    gpu_nodes = [n.name for n in snap.gpu_nodes]
    assert sorted(gpu_nodes) == sorted(sim_cluster.node_names)
    assert all((n.gpu_product or "").startswith("NVIDIA-H100-") for n in snap.gpu_nodes)
    assert snap.cluster is not None and snap.cluster.provider == "eks"
    release = snap.cluster.release("gpu-operator", target.component("gpu-operator").namespace)
    assert release is not None and release.version == "v25.10.1"
    assert dict(release.values) == target.component("gpu-operator").values
    assert snap.cluster.cluster_policy is not None
    assert snap.cluster.cluster_policy["spec"]["driver"]["version"] == "580.105.08"
    derived = tmp_path / "derived.yaml"
    assert dsx("recipe", "--snapshot", str(path), "--intent", "training", "-o", str(derived)) == 0
    criteria = documents.load_mapping_file(derived)["metadata"]["criteria"]
    assert criteria["accelerator"] == "h100"
    assert criteria["nodes"] == len(sim_cluster.node_names)


def test_conformance_on_the_simulated_gpu_nodes(installed: Installed, kubeconfig: str, tmp_path: Path) -> None:
    _, recipe_path, _ = installed
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "conformance"]
    dsx(*args, "--output", str(report))
    tests = report_tests(report)
    for name in (
        "conformance/gpu-advertised",
        "conformance/gpu-pool-consistency",
        "conformance/gpu-daemonsets-cover-gpu-nodes",
        "conformance/gpu-taints-tolerated",
    ):
        assert tests[name]["status"] == "passed", tests[name]["message"]


def test_attested_report_verifies_and_an_edit_fails(installed: Installed, kubeconfig: str, tmp_path: Path) -> None:
    _, recipe_path, _ = installed
    assert dsx("keygen", "--out", str(tmp_path / "validator"), "--algorithm", "ecdsa-p256") == 0
    report = tmp_path / "evidence" / "report.json"
    report.parent.mkdir()
    args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "readiness,deployment"]
    args += ["--output", str(report), "--attest", "--key", str(tmp_path / "validator.key"), "--validator", "ci"]
    assert dsx(*args) == 0
    public = str(tmp_path / "validator.pub")
    assert dsx("verify", str(report), "--key", public) == 0
    doc = json.loads(report.read_text())
    doc["results"]["summary"]["failed"] = 0 if doc["results"]["summary"]["failed"] else 1
    report.write_text(json.dumps(doc, indent=2) + "\n")
    assert dsx("verify", str(report), "--key", public) == 1


def test_node_snapshots_travel_through_configmaps(
    installed: Installed, sim_cluster: Any, kubeconfig: str, tmp_path: Path
) -> None:
    """What the in-cluster agent does: node snapshot → ConfigMap; cluster snapshot merges them."""
    target, _, _ = installed
    namespace = target.component("dsx-sentinel").namespace
    node = sim_cluster.node_names[0]
    data = Path(__file__).resolve().parents[2] / "data" / "validation" / "hosts"
    args = ["snapshot", "node", "--root", str(data / "h100-ubuntu"), "--node-name", node]
    args += ["--nvidia-smi-xml", str(data / "h100-ubuntu.nvidia-smi.xml"), "--kubeconfig", kubeconfig]
    assert dsx(*args, "-o", f"cm://{namespace}/dsx-node-{node}") == 0
    assert dsx(*args, "-o", f"cm://{namespace}/dsx-node-{node}") == 0  # idempotent
    merged = tmp_path / "merged.yaml"
    cluster = ["snapshot", "--kubeconfig", kubeconfig, "--node-snapshots-from", namespace, "-o", str(merged)]
    assert dsx(*cluster) == 0
    snap = documents.snapshot_file(str(merged))
    with_host = [n for n in snap.nodes if n.host is not None]
    assert [n.name for n in with_host] == [node]
    assert with_host[0].labels and with_host[0].host is not None and len(with_host[0].host.gpus) == 8
