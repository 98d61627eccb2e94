"""Area of concern: a Helm bundle's deploy.sh and undeploy.sh work on a real API server (`dsx sim`)
with the real helm binary and stand-in charts served from a local chart repository: install in
order with CRD waits and health asserts, best-effort past a failing component, and an undeploy
that leaves no release, webhook configuration or finalizer of the bundle behind (and touches
nothing else)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx import file_tree as tree
from dsx import serialization
from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.model.recipe import Recipe

pytestmark = pytest.mark.integration

GROUP = "standin.dsx.run"
FINALIZER = f"{GROUP}/cleanup"

CRD = f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{GROUP}
  labels: {{app.kubernetes.io/instance: "{{{{ .Release.Name }}}}"}}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""

WEB = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app.kubernetes.io/instance: "{{{{ .Release.Name }}}}"}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata:
      labels: {{app: web}}
      {{{{- if .Values.stuck }}}}
      annotations: {{sim.dsx.run/waiting-reason: ImagePullBackOff}}
      {{{{- end }}}}
    spec:
      tolerations: [{{operator: Exists}}]
      containers: [{{name: web, image: "registry.example/web:{{{{ .Values.tag }}}}"}}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-state
  finalizers: [{FINALIZER}]
  labels: {{app.kubernetes.io/instance: "{{{{ .Release.Name }}}}"}}
data: {{state: ready}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: "web-{{{{ .Release.Namespace }}}}"
  labels: {{app.kubernetes.io/instance: "{{{{ .Release.Name }}}}"}}
webhooks:
  - name: widgets.{GROUP}
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: [v1]
    clientConfig:
      service: {{name: web, namespace: "{{{{ .Release.Namespace }}}}", port: 443}}
    rules:
      - {{apiGroups: [{GROUP}], apiVersions: [v1], operations: [CREATE], resources: [widgets]}}
{{{{- if .Values.side }}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-side
  namespace: "{{{{ .Values.side }}}}"
  finalizers: [{FINALIZER}]
data: {{state: ready}}
{{{{- end }}}}
"""


def _chart(root: Path, name: str, templates: dict[str, str], values: str = "") -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(values)
    for file_name, text in templates.items():
        (chart / "templates" / file_name).write_text(text)
    return chart


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def chart_repo(helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Helm chart repository on 127.0.0.1 with the stand-in charts (packaged by real helm)."""
    src = tmp_path_factory.mktemp("charts")
    served = tmp_path_factory.mktemp("repo")
    charts = [
        _chart(src, "standin-crds", {"crd.yaml": CRD}),
        _chart(src, "standin-web", {"web.yaml": WEB}, "stuck: false\ntag: '1'\nside: ''\n"),
    ]
    for chart in charts:
        subprocess.run([str(helm_binary), "package", str(chart), "-d", str(served)], check=True, capture_output=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=served))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run([str(helm_binary), "repo", "index", str(served), "--url", url], check=True, capture_output=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url
    server.shutdown()
    server.server_close()


def _helm_ref(
    name: str,
    repo: str,
    namespace: str,
    *,
    version: str = "0.1.0",
    deps: list[str] | None = None,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "type": "Helm",
        "chart": name,
        "source": repo,
        "namespace": namespace,
        "version": version,
        "values": values or {},
        "dependencyRefs": deps or [],
    }


def _widgets_ref(namespace: str, deps: list[str]) -> dict[str, Any]:
    widget = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "finalizers": [FINALIZER]},
        "spec": {"size": 1},
    }
    return {
        "name": "standin-widgets",
        "type": "Manifest",
        "namespace": namespace,
        "version": "v1",
        "manifests": {"widget.yaml": serialization.dump_yaml(widget)},
        "dependencyRefs": deps,
    }


def _recipe(refs: list[dict[str, Any]]) -> Recipe:
    raw = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {"name": "standin", "criteria": {}},
        "constraints": [],
        "componentRefs": refs,
        "deploymentOrder": [r["name"] for r in refs],
    }
    return Recipe.from_dict(raw, source="standin.yaml")


class Cluster:
    """kubectl and helm on the sim cluster, and the environment the bundle scripts run in."""

    def __init__(self, sim: Any, helm: Path, home: Path) -> None:
        state = sim.cluster.load_state()
        kubectl = Path(state.binaries["kubectl"])
        bin_dir = home / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        for tool, path in (("kubectl", kubectl), ("helm", helm)):
            if not (bin_dir / tool).exists():
                (bin_dir / tool).symlink_to(path)
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
            "HOME": str(home),
            "KUBECONFIG": str(sim.kubeconfig),
            "HELM_CACHE_HOME": str(home / "helm-cache"),
            "HELM_CONFIG_HOME": str(home / "helm-config"),
            "HELM_DATA_HOME": str(home / "helm-data"),
        }

    def run(self, *argv: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, check=check, timeout=timeout)

    def json(self, *argv: str) -> Any:
        return json.loads(self.run("kubectl", *argv, "--output", "json").stdout)

    def script(self, bundle: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("bash", str(bundle / script), *args, check=False, timeout=600)

    def releases(self, namespace: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = json.loads(
            self.run("helm", "list", "--namespace", namespace, "--output", "json").stdout
        )
        return out


@pytest.fixture
def cluster(sim_cluster: Any, helm_binary: Path, tmp_path: Path) -> Cluster:
    return Cluster(sim_cluster, helm_binary, tmp_path / "home")


def _write(recipe: Recipe, path: Path) -> Path:
    tree.write_tree(render.render(recipe, Deployer.HELM), path)
    return path


def _leave_pending_upgrade(cluster: Cluster, bundle: Path, namespace: str) -> None:
    """Kill an upgrade of standin-web that waits forever, as a lost CI runner would: pending-upgrade."""
    upgrade = subprocess.Popen(
        ["helm", "upgrade", "--namespace", namespace, "--reuse-values", "--set", "stuck=true,tag=2",
         "--wait", "--timeout", "5m", "--", "standin-web", str(bundle / "standin-web.tgz")],
        env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = [r["status"] for r in cluster.releases(namespace) if r["name"] == "standin-web"]
            if status == ["pending-upgrade"]:
                break
            time.sleep(0.3)
        else:
            pytest.fail("the upgrade never reached pending-upgrade")
    finally:
        upgrade.send_signal(signal.SIGKILL)
        upgrade.wait()


def test_deploy_installs_in_order_and_undeploy_leaves_nothing_behind(
    cluster: Cluster, chart_repo: str, tmp_path: Path
) -> None:
    ns = f"b-{uuid.uuid4().hex[:8]}"
    other = f"o-{uuid.uuid4().hex[:8]}"
    recipe = _recipe(
        [
            _helm_ref("standin-crds", chart_repo, ns),
            _helm_ref("standin-web", chart_repo, ns, deps=["standin-crds"], values={"side": other}),
            _widgets_ref(ns, ["standin-crds"]),
        ]
    )
    bundle = _write(recipe, tmp_path / "bundle")

    dry = cluster.script(bundle, "deploy.sh", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "+ helm upgrade --install --repo" in dry.stdout and "kubectl apply --filename" in dry.stdout
    assert not cluster.releases(ns), "a dry run installed something"

    cluster.run("kubectl", "create", "namespace", other)  # the web chart puts an object there too
    deployed = cluster.script(bundle, "deploy.sh", "--timeout", "2m")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert "pre-flight: context" in deployed.stdout
    assert {r["name"]: r["status"] for r in cluster.releases(ns)} == {
        "standin-crds": "deployed",
        "standin-web": "deployed",
    }
    assert cluster.json("get", "deployment", "web", "--namespace", ns)["status"]["readyReplicas"] == 1
    assert cluster.json("get", f"widgets.{GROUP}", "w1", "--namespace", ns)["metadata"]["finalizers"] == [FINALIZER]
    # health asserts ran between the levels: after standin-crds, before what needs it
    out = deployed.stdout
    assert out.index("health: standin-crds") < out.index("[2/3] standin-web") < out.index("health: standin-web")

    # what an operator leaves behind at run time, and what belongs to someone else
    leftover = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": f"runtime-{ns}", "labels": {"app.kubernetes.io/instance": "standin-web"}},
    }
    foreign = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": f"foreign-{ns}", "labels": {"app.kubernetes.io/instance": "someone-else"}},
    }
    foreign_cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "keep", "namespace": other, "finalizers": [FINALIZER]},
    }
    for doc in (leftover, foreign, foreign_cm):
        subprocess.run(
            ["kubectl", "apply", "--filename", "-"], input=json.dumps(doc), env=cluster.env, check=True,
            capture_output=True, text=True,
        )  # fmt: skip
    helm_pull = cluster.run(
        "helm", "pull", "standin-web", "--repo", chart_repo, "--version", "0.1.0", "--destination", str(tmp_path)
    )
    assert helm_pull.returncode == 0
    (tmp_path / "standin-web-0.1.0.tgz").rename(bundle / "standin-web.tgz")
    _leave_pending_upgrade(cluster, bundle, ns)
    redeploy = cluster.script(bundle, "deploy.sh")
    assert redeploy.returncode == 1
    assert "release standin-web in" in redeploy.stderr and "./undeploy.sh clears it" in redeploy.stderr

    removed = cluster.script(bundle, "undeploy.sh", "--grace", "3s", "--timeout", "60s")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "standin-web is pending-upgrade: rolling back" in removed.stdout
    assert "clearing finalizers of ConfigMap/web-state" in removed.stdout
    assert f"clearing finalizers of ConfigMap/web-side in {other}" in removed.stdout
    assert f"clearing finalizers of Widget.{GROUP}/w1" in removed.stdout
    assert cluster.releases(ns) == []
    webhooks = cluster.json("get", "validatingwebhookconfigurations,mutatingwebhookconfigurations")["items"]
    names = {w["metadata"]["name"] for w in webhooks}
    assert f"web-{ns}" not in names and f"runtime-{ns}" not in names
    assert f"foreign-{ns}" in names
    left = {cm["metadata"]["name"] for cm in cluster.json("get", "configmaps", "--namespace", ns)["items"]}
    assert left <= {"kube-root-ca.crt"}, "web-state kept its finalizer"
    assert cluster.run("kubectl", "get", f"widgets.{GROUP}", "--all-namespaces", check=False).returncode != 0
    assert cluster.run("kubectl", "get", "crd", f"widgets.{GROUP}", check=False).returncode != 0
    assert cluster.json("get", "configmap", "keep", "--namespace", other)["metadata"]["finalizers"] == [FINALIZER]
    assert cluster.run("kubectl", "get", "configmap", "web-side", "--namespace", other, check=False).returncode != 0
    cluster.run("kubectl", "patch", "configmap", "keep", "--namespace", other, "--type", "merge",
                "--patch", '{"metadata":{"finalizers":null}}')  # fmt: skip
    cluster.run("kubectl", "delete", "mutatingwebhookconfiguration", f"foreign-{ns}")


def test_best_effort_installs_the_rest_and_names_the_failure(cluster: Cluster, chart_repo: str, tmp_path: Path) -> None:
    ns = f"e-{uuid.uuid4().hex[:8]}"
    recipe = _recipe(
        [
            _helm_ref("standin-crds", chart_repo, ns),
            _helm_ref("standin-broken", chart_repo, ns, version="9.9.9"),
            _widgets_ref(ns, ["standin-broken"]),
            _helm_ref("standin-web", chart_repo, ns, deps=["standin-crds"]),
        ]
    )
    bundle = _write(recipe, tmp_path / "bundle")
    fast = ("--retries", "1", "--retry-delay", "0", "--timeout", "2m")

    stopped = cluster.script(bundle, "deploy.sh", *fast)
    assert stopped.returncode == 1
    assert "stopping at standin-broken" in stopped.stderr
    assert "retry 1 of 1" in stopped.stderr
    assert [r["name"] for r in cluster.releases(ns)] == ["standin-crds"]

    best = cluster.script(bundle, "deploy.sh", "--best-effort", *fast)
    assert best.returncode == 1
    assert "failed: standin-broken standin-widgets (not attempted, a dependency failed: standin-widgets)" in best.stderr
    assert {r["name"]: r["status"] for r in cluster.releases(ns)} == {
        "standin-crds": "deployed",
        "standin-web": "deployed",
    }

    removed = cluster.script(bundle, "undeploy.sh", "--grace", "3s", "--timeout", "60s")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "release standin-broken is not installed" in removed.stdout
    assert cluster.releases(ns) == []
