"""Area of concern: the Helm chart deploy/helm/dsx-sentinel is the one source of the sentinel's
in-cluster manifests, and what it installs runs. helm lints it strictly; its rendering is what
deploy/sentinel/ and the bundle component hold; the apiserver accepts every object (server-side
dry run); `helm install` on `dsx sim` brings the objects up; and a real `dsx sentinel run`
process, given only what a pod of the chart gets (the in-cluster environment and a token the
apiserver issued for the chart's ServiceAccount, no kubeconfig), elects itself leader and
quarantines a node after `dsx sim inject --fault xid79` — with the chart's RBAC and nothing else."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest

from dsx import serialization, settings
from dsx.bundles import render
from dsx.bundles.options import BundleOptions, Deployer
from dsx.health.decisions import nodes
from dsx.kube.client import KubeClient
from dsx.model import criteria as criteria_model
from dsx.recipes import resolve

from .harness import SentinelProcess, gpu_fault_rule, policy_file, restore, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "deploy" / "helm" / "dsx-sentinel"


def generator() -> ModuleType:
    """hack/gen-sentinel-manifests.py, the script that writes the committed renderings."""
    spec = importlib.util.spec_from_file_location("gen_sentinel_manifests", REPO / "hack" / "gen-sentinel-manifests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def helm(binary: Path, home: Path, *args: str, check: bool = True) -> str:
    """Run helm with its cache and configuration under `home` (the user's stay untouched)."""
    env = {
        **os.environ,
        **{v: str(home / v.lower()) for v in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")},
    }
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 or not check, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in serialization.parse_yaml_documents(text, source="helm template") if isinstance(d, dict) and d]


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    runs: str
    """The certification namespace of this release."""


def test_the_chart_lints_strictly(helm_binary: Path, tmp_path: Path) -> None:
    out = helm(helm_binary, tmp_path, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    out = helm(
        helm_binary,
        tmp_path,
        "lint",
        "--strict",
        str(CHART),
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "store.url=postgresql://dsx@db:5432/dsx",
        "--set",
        "enabledStages={quarantine,drain}",
        "--set",
        "policy.breaker.maxQuarantinedPercent=5",
    )
    assert "0 chart(s) failed" in out


def test_the_committed_manifests_are_the_charts_rendering(helm_binary: Path) -> None:
    gen = generator()
    generated = gen.outputs(helm_binary)
    for path, text in generated.items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run hack/gen-sentinel-manifests.py"
    committed = {*gen.DEPLOY.glob("*.yaml"), *gen.COMPONENT.glob("*.yaml")}
    assert committed == set(generated)


def test_the_bundles_sentinel_objects_are_the_charts(helm_binary: Path, tmp_path: Path) -> None:
    recipe = resolve.resolve(
        criteria_model.Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training", platform="kubeflow")
    )
    tree = render.render(recipe, Deployer.HELM, BundleOptions())
    shipped = [
        doc
        for path, data in sorted(tree.files.items())
        if path.startswith("dsx-sentinel/manifests/")
        for doc in documents(data.decode())
    ]
    chart = documents(
        helm(
            helm_binary, tmp_path, "template", "dsx-sentinel", str(CHART), "--namespace", "dsx-system", "--include-crds"
        )
    )
    key = serialization.canonical_json
    assert sorted(map(key, shipped)) == sorted(map(key, chart))


def test_values_change_what_is_rendered(helm_binary: Path, tmp_path: Path) -> None:
    out = helm(
        helm_binary,
        tmp_path,
        "template",
        "dsx-sentinel",
        str(CHART),
        "--namespace",
        "dsx-system",
        "--set",
        "replicaCount=1",
        "--set",
        "leaderElection.enabled=false",
        "--set",
        "logLevel=debug",
        "--set",
        "enabledStages={quarantine,drain}",
        "--set",
        "store.url=postgresql://dsx@db:5432/dsx",
        "--set",
        "policy.breaker.maxQuarantinedPercent=5",
        "--set",
        "monitor.enabled=false",
    )
    found = {(d["kind"], d["metadata"]["name"]): d for d in documents(out)}
    deployment = found[("Deployment", "dsx-sentinel")]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deployment["spec"]["replicas"] == 1 and "--leader-elect" not in args
    assert {"--log-level=debug", "--enable=quarantine,drain"} <= set(args)
    assert found[("Secret", "dsx-sentinel-store")]["stringData"] == {"url": "postgresql://dsx@db:5432/dsx"}
    merged = serialization.parse_yaml(found[("ConfigMap", "dsx-sentinel-policy")]["data"]["policy.yaml"], source="x")
    assert merged["breaker"]["maxQuarantinedPercent"] == 5 and merged["quarantine"]["ruleSets"]
    assert ("DaemonSet", "dsx-sentinel-monitor") not in found
    failed = subprocess.run(
        [str(helm_binary), "template", "x", str(CHART), "--set", "leaderElection.enabled=false"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode != 0 and "replicaCount > 1 needs leaderElection.enabled" in failed.stderr


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--set", "enabledStages={quarantine,recertify}"], "recertify would certify nodes"),
        (["--set", "policy.stages.validation.enabled=true"], "validation would certify nodes"),
        (["--set", "enabledStages={recertify}", "--set", "policy.stages.recertify.dryRun=true"], ""),
        (["--set", "enabledStages={recertify}", "--set", "policy.certification.image=registry.example/w:1"], ""),
        (["--set", "enabledStages={quarantine,drain}"], ""),
    ],
)
def test_the_chart_refuses_what_the_sentinel_would_refuse_at_start(
    helm_binary: Path, flags: list[str], refused: str
) -> None:
    """Issue 31: a stage that certifies nodes, acting, needs policy.certification.image; `dsx sentinel
    run` exits at start without it, so the chart says so at render time instead of a crash loop."""
    done = subprocess.run(
        [str(helm_binary), "template", "x", str(CHART), *flags], capture_output=True, text=True, timeout=120
    )
    if refused:
        assert done.returncode != 0 and refused in done.stderr and "policy.certification.image" in done.stderr
    else:
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def release(sim_cluster: Any, helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """The chart installed by helm on the shared sim, under names no other test uses."""
    suffix = uuid.uuid4().hex[:6]
    installed = Release(f"dsx-sentinel-{suffix}", f"dsx-helm-{suffix}", f"dsx-helm-runs-{suffix}")
    home = tmp_path_factory.mktemp("helm")
    kubeconfig = str(sim_cluster.kubeconfig)
    try:
        helm(
            helm_binary,
            home,
            "install",
            installed.name,
            str(CHART),
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            installed.namespace,
            "--create-namespace",
            "--set",
            f"certification.namespace={installed.runs}",
            "--wait",
            "--timeout",
            "180s",
        )
        yield installed
    finally:
        uninstall = ["uninstall", installed.name, "--namespace", installed.namespace, "--wait", "--timeout", "120s"]
        helm(helm_binary, home, *uninstall, "--kubeconfig", kubeconfig, check=False)
        with KubeClient(sim_cluster.kubeconfig) as admin:
            admin.delete("v1", "Namespace", installed.namespace)


def test_helm_install_brings_the_objects_up(release: Release, kube_client: KubeClient) -> None:
    name, namespace = release.name, release.namespace
    for api_version, kind, where in (
        ("v1", "ServiceAccount", namespace),
        ("v1", "Service", namespace),
        ("v1", "ConfigMap", namespace),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", None),
        ("rbac.authorization.k8s.io/v1", "Role", release.runs),
    ):
        suffix = {"ConfigMap": "-policy", "Role": "-certification"}.get(kind, "")
        assert kube_client.get(api_version, kind, name + suffix, where)["metadata"]["name"] == name + suffix
    status = kube_client.workload_status("Deployment", namespace, name)
    assert status.rolled_out and status.ready == 2  # --wait: both replicas ready (kwok runs pods as fake)
    monitor = kube_client.workload_status("DaemonSet", namespace, f"{name}-monitor")
    assert monitor.desired >= 1 and monitor.rolled_out


def test_every_rendered_object_passes_a_server_side_dry_run(
    helm_binary: Path, release: Release, kube_client: KubeClient, tmp_path: Path
) -> None:
    """The default rendering, moved into the release's namespaces (they exist), as the apiserver sees it."""
    rendered = helm(
        helm_binary,
        tmp_path,
        "template",
        "dsx-sentinel-dry",
        str(CHART),
        "--namespace",
        release.namespace,
        "--set",
        f"certification.namespace={release.runs}",
    )
    checked = []
    for doc in documents(rendered):
        if doc["kind"] == "Namespace":
            continue  # created by the release already
        answer = kube_client.apply(doc, dry_run=True)
        checked.append((answer["kind"], answer["metadata"]["name"]))
    assert ("Deployment", "dsx-sentinel-dry") in checked and ("DaemonSet", "dsx-sentinel-dry-monitor") in checked
    with pytest.raises(Exception, match="not found"):  # a dry run stored nothing
        kube_client.get("apps/v1", "Deployment", "dsx-sentinel-dry", release.namespace)


def test_the_sentinel_runs_in_cluster_with_the_charts_service_account(
    release: Release, sim_cluster: Any, kube_client: KubeClient, tmp_path: Path
) -> None:
    node = sim_cluster.node_names[2]
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(kube_client.service_account_token(release.namespace, release.name))
    shutil.copy(sim_cluster.state_dir / "pki" / "ca.crt", account / "ca.crt")
    (account / "namespace").write_text(release.namespace)
    server = urlsplit(kube_client.server)
    home = tmp_path / "home"
    home.mkdir()
    policy = policy_file(
        tmp_path,
        {
            "stages": {"quarantine": {"enabled": True}},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {"ruleSets": [gpu_fault_rule(f"node.metadata.name == '{node}'")]},
            "certification": {"namespace": release.runs},
            "monitors": {
                "kernelLogs": [{"node": node, "path": str(sim_cluster.kernel_log(node))}],
                "startAtEnd": True,
            },
        },
    )
    in_pod = {
        "KUBECONFIG": None,
        "HOME": str(home),  # no ~/.kube/config
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port),
        settings.SERVICE_ACCOUNT_DIR_ENV: str(account),
        "POD_NAMESPACE": release.namespace,
    }
    sentinel = SentinelProcess(
        tmp_path,
        policy,
        f"sqlite:///{tmp_path / 'events.db'}",
        "--leader-elect",
        "--leader-elect-lease-name",
        release.name,
        "--owner",
        release.name,
        env=in_pod,
    )
    try:
        sentinel.start()
        lease = wait_for(lambda: kube_client.get_lease(release.namespace, release.name), 30, "the Lease", sentinel)
        assert lease["spec"]["holderIdentity"]
        wait_for(lambda: sentinel.metric("dsx_sentinel_leader") == 1, 30, "leadership", sentinel)
        inject = ["sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "xid79"]
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        subprocess.run([sys.executable, "-m", "dsx", *inject], check=True, capture_output=True, env=env)
        wait_for(lambda: nodes.unschedulable(kube_client.get_node(node)), 60, f"{node} cordoned", sentinel)
        marked = kube_client.get_node(node)
        assert nodes.has_taint(marked, "sentinel.dsx.run/quarantined")
        assert nodes.annotations_of(marked)["sentinel.dsx.run/reason"].startswith("fatal-gpu-fault: KernelLogXid 79")
        assert "kubeconfig" not in " ".join(sentinel.argv)
    finally:
        sentinel.stop()
        restore(kube_client, node)


def sentinel_recipe(release: Release, folder: Path) -> Path:
    """A recipe holding the installed release as its one component, with the catalog's asserts renamed."""
    from dsx.model import recipe as recipe_model
    from dsx.recipes import catalog

    shipped = catalog.load().components["dsx-sentinel"]
    renamed = [
        {**a.to_dict(), "name": a.name.replace("dsx-sentinel", release.name)} for a in shipped.health_check_asserts
    ]
    document = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {
            "name": "chart",
            "generator": "dsx/test",
            "criteria": {},
            "overlays": [],
            "unvalidatedCriteria": [],
        },
        "constraints": [],
        "componentRefs": [
            {
                "name": "dsx-sentinel",
                "type": "Manifest",
                "namespace": release.namespace,
                "version": shipped.version,
                "values": {},
                "dependencyRefs": [],
                "manifests": {"chart.yaml": "# installed by helm\n"},
                "healthCheckAsserts": renamed,
            }
        ],
        "deploymentOrder": ["dsx-sentinel"],
    }
    target = recipe_model.Recipe.from_dict(document, source="chart recipe").with_digest()
    path = folder / "recipe.yaml"
    path.write_text(serialization.dump_yaml(target.to_dict()))
    return path


def validate_deployment(recipe_path: Path, kubeconfig: str, report: Path) -> tuple[int, dict[str, Any]]:
    argv = ["validate", "--recipe", str(recipe_path), "--kubeconfig", kubeconfig, "--phase", "deployment"]
    done = subprocess.run(
        [sys.executable, "-m", "dsx", *argv, "--output", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert report.is_file(), done.stderr
    document = serialization.parse_json(report.read_text(), source=str(report))
    tests = {t["name"]: t for t in document["results"]["tests"]}
    return done.returncode, tests


def test_validate_judges_the_installed_chart_by_its_secrets_and_its_lease(
    release: Release, sim_cluster: Any, kube_client: KubeClient, tmp_path: Path
) -> None:
    """kwok marks the chart's pods Ready whatever runs; the Secrets and the leader's Lease tell the truth."""
    recipe_path = sentinel_recipe(release, tmp_path)
    kubeconfig = str(sim_cluster.kubeconfig)
    deployment = f"deployment/dsx-sentinel/Deployment/{release.name}"
    lease = f"deployment/dsx-sentinel/Lease/{release.name}"
    references = f"{deployment}/references"

    # as installed, before the README's two `kubectl create secret` steps and with no sentinel running
    code, tests = validate_deployment(recipe_path, kubeconfig, tmp_path / "bare.json")
    assert code == 1
    assert tests[deployment]["status"] == "passed"  # the pods look fine
    assert tests[references]["status"] == "failed"
    assert tests[references]["extra"]["evidence"]["missing"] == [
        "Secret dsx-sentinel-store",
        "Secret dsx-sentinel-tokens",
    ]
    # not found, or left released by the in-cluster run above
    assert tests[lease]["status"] == "failed"
    assert tests[lease]["message"].endswith(("not found", "not held (released, or never taken)"))

    secrets = {
        "dsx-sentinel-store": {"url": "postgresql://dsx@db.invalid:5432/dsx"},
        "dsx-sentinel-tokens": {"tokens": "t0"},
    }
    for name, data in secrets.items():
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": release.namespace}}
        kube_client.apply({**secret, "stringData": data})
    policy = policy_file(tmp_path, {"certification": {"namespace": release.runs}})
    sentinel = SentinelProcess(
        tmp_path,
        policy,
        f"sqlite:///{tmp_path / 'events.db'}",
        "--kubeconfig",
        kubeconfig,
        "--leader-elect",
        "--leader-elect-namespace",
        release.namespace,
        "--leader-elect-lease-name",
        release.name,
    )
    try:
        sentinel.start()
        wait_for(lambda: sentinel.metric("dsx_sentinel_leader") == 1, 30, "leadership", sentinel)
        code, tests = validate_deployment(recipe_path, kubeconfig, tmp_path / "running.json")
        failed = {name: t["message"] for name, t in tests.items() if t["status"] == "failed"}
        assert code == 0, failed
        assert tests[lease]["status"] == "passed" and "held by " in tests[lease]["message"]
        assert tests[references]["status"] == "passed"

        for name in secrets:  # the case: Secrets deleted under a running sentinel
            kube_client.delete("v1", "Secret", name, release.namespace)
        code, tests = validate_deployment(recipe_path, kubeconfig, tmp_path / "no-secrets.json")
        assert code == 1
        assert tests[references]["status"] == "failed" and "a new pod will not start" in tests[references]["message"]
    finally:
        sentinel.stop()
    code, tests = validate_deployment(recipe_path, kubeconfig, tmp_path / "stopped.json")
    assert code == 1
    assert tests[lease]["status"] == "failed" and "not held" in tests[lease]["message"]
