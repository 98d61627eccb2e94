"""The certification engine on a simulated cluster: JobSet's and Kubeflow Trainer's real controllers.

`dsx sim up --engine` runs the two controller managers built from the Go module proxy (the
versions the recipes' kubeflow-trainer component deploys) as local processes beside the control
plane, with the CRDs their module sources ship and their admission webhooks served on loopback,
so a TrainJob becomes a JobSet, Jobs and pods on the kwok nodes exactly as on a real cluster,
validated and defaulted by the same code. What differs from an in-cluster install is only how
the controllers are reached: each serves its webhooks on 127.0.0.1 with a certificate from the
cluster's CA (their own certificate rotation is turned off), and the webhook configurations point
at those URLs instead of a Service. Leader election is off (one replica each).

JobSet's pod webhooks only see JobSet's pods (the objectSelector its Helm chart sets), so the rest
of the cluster is untouched when the engine is down.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dsx import atomic, errors, httpclient, serialization
from dsx.kube.client import KubeClient
from dsx.sim import binaries, pki

COMPONENTS = ("jobset-controller", "trainer-controller-manager")
PORTS = ("jobset-webhook", "jobset-health", "trainer-webhook", "trainer-health")
LOOPBACK = "127.0.0.1"
JOBSET_POD_SELECTOR = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
"""JobSet's chart limits its pod webhooks to JobSet's pods; the kustomize base does it with a patch."""
WEBHOOK_PREFIX = "dsx-sim-"


def folder(state_dir: Path) -> Path:
    return state_dir / "engine"


def prepare(state_dir: Path, certs: pki.Pki, ports: Mapping[str, int]) -> dict[str, Path]:
    """Serving certificates and configuration files; returns each component's cert folder."""
    root = folder(state_dir)
    serving = pki.serving_certificate(certs, root / "serving-certs", ips=(LOOPBACK,))
    jobset_config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": ports["jobset-webhook"], "host": LOOPBACK, "certDir": str(serving)},
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{ports['jobset-health']}"},
        "metrics": {"bindAddress": "0"},
    }
    trainer_config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"port": ports["trainer-webhook"], "host": LOOPBACK},
        "health": {
            "healthProbeBindAddress": f"{LOOPBACK}:{ports['trainer-health']}",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
        "metrics": {"bindAddress": "0"},
    }
    atomic.write_file(root / "jobset.yaml", serialization.dump_yaml(jobset_config))
    atomic.write_file(root / "trainer.yaml", serialization.dump_yaml(trainer_config))
    # the Trainer manager takes its webhook certificates from controller-runtime's default
    # folder under $TMPDIR: give it one of its own holding the serving certificate
    trainer_tmp = root / "trainer-tmp" / "k8s-webhook-server" / "serving-certs"
    trainer_tmp.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        atomic.write_file(trainer_tmp / name, (serving / name).read_text(encoding="utf-8"), mode=0o600)
    return {"serving": serving, "trainer-tmp": root / "trainer-tmp"}


def argv(component: str, files: binaries.Engine, state_dir: Path, kubeconfig: Path) -> list[str]:
    root = folder(state_dir)
    if component == "jobset-controller":
        return [
            str(files.jobset),
            f"--kubeconfig={kubeconfig}",
            f"--config={root / 'jobset.yaml'}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            "--zap-log-level=info",
        ]
    if component == "trainer-controller-manager":
        return [str(files.trainer), f"--kubeconfig={kubeconfig}", f"--config={root / 'trainer.yaml'}"]
    raise errors.InternalError(f"unknown engine component {component!r}")


def environment(component: str, state_dir: Path) -> dict[str, str]:
    """What a component needs beside the environment it inherits."""
    if component == "trainer-controller-manager":
        return {"TMPDIR": str(folder(state_dir) / "trainer-tmp")}
    return {}


def install_crds(kube: KubeClient, files: binaries.Engine) -> list[str]:
    """JobSet's and Trainer's CRDs, server-side applied, each waited on until established."""
    names = []
    for path in (files.jobset_crds, files.trainer_crds):
        for document in serialization.parse_yaml_documents(path.read_text(encoding="utf-8"), source=str(path)):
            if not document:
                continue
            kube.create_crd(document)
            names.append(str(document["metadata"]["name"]))
    return names


def webhook_configurations(files: binaries.Engine, ca_cert: Path, ports: Mapping[str, int]) -> list[dict[str, Any]]:
    """The controllers' webhook configurations, pointed at their loopback servers."""
    ca_bundle = base64.b64encode(ca_cert.read_bytes()).decode()
    out = []
    for path, port in (
        (files.jobset_webhooks, ports["jobset-webhook"]),
        (files.trainer_webhooks, ports["trainer-webhook"]),
    ):
        for document in serialization.parse_yaml_documents(path.read_text(encoding="utf-8"), source=str(path)):
            if not document:
                continue
            config = copy.deepcopy(document)
            config["metadata"] = {"name": WEBHOOK_PREFIX + str(document["metadata"]["name"])}
            for hook in config.get("webhooks", []):
                service = hook["clientConfig"].pop("service")
                hook["clientConfig"] = {"url": f"https://{LOOPBACK}:{port}{service['path']}", "caBundle": ca_bundle}
                if any("pods" in rule.get("resources", []) for rule in hook.get("rules", [])):
                    hook["objectSelector"] = copy.deepcopy(JOBSET_POD_SELECTOR)
                hook["timeoutSeconds"] = 10
            out.append(config)
    return out


def ready(ports: Mapping[str, int]) -> Callable[[], bool]:
    """True once both managers answer /readyz (their webhook servers are listening)."""

    def check() -> bool:
        for port in (ports["jobset-health"], ports["trainer-health"]):
            try:
                answer = httpclient.request("GET", f"http://{LOOPBACK}:{port}/readyz", timeout_seconds=2)
            except httpclient.TransportError:
                return False
            if answer.status != 200:
                return False
        return True

    return check
