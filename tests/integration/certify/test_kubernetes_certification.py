"""Area of concern: `--executor kubernetes` on a real apiserver (dsx sim) creates one Job per node,
pinned where the run says, turns a failed pod into that node's reason, and leaves nothing behind.

Pods are kwok pods: the scheduler, the Job controller and pod logs through the apiserver are
real; what the containers would print and exit with comes from `SimulatedContainers`
(conftest), which seeds collected nccl-tests logs per pod.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.certify import engine
from dsx.executors import kubernetes
from dsx.kube import certify_jobs
from dsx.kube.client import KubeClient
from dsx.kube.jobs import RunLauncher
from dsx.model import certification as model

from .simulated_containers import Container, SimulatedContainers, sample

pytestmark = pytest.mark.integration

BAD_NODE = "gpu-node-03"


@pytest.fixture
def simulated_containers(sim_cluster: Any, kube_client: KubeClient, sim_namespace: str) -> SimulatedContainers:
    return SimulatedContainers(
        inner=RunLauncher(kube_client, namespace=sim_namespace, poll_seconds=0.2),
        cluster=sim_cluster.cluster,
        kube=kube_client,
        launcher_log=sample("01-allreduce-h100-2node-gcp-a3mega.log"),
    )


def _leftovers(kube: KubeClient, namespace: str, certification_id: str) -> list[str]:
    labels = {kubernetes.CERTIFICATION_LABEL: certification_id}
    return [
        f"{kind}/{obj['metadata']['name']}"
        for api_version, kind in (("batch/v1", "Job"), ("v1", "Pod"), ("v1", "Service"))
        for obj in kube.list(api_version, kind, namespace, labels=labels)
    ]


def test_jobs_run_on_their_nodes_and_a_failed_pod_becomes_that_nodes_reason(
    simulated_containers: SimulatedContainers, kube_client: KubeClient, sim_namespace: str
) -> None:
    simulated_containers.faulty = {
        BAD_NODE: Container(exit_code=1, log=sample("08-allreduce-h100-2node-init-failure-WARN.log"))
    }
    nodes = certify_jobs.candidate_nodes(kube_client)
    spec = model.Certification(
        categories=(model.CategoryRequest("nccl-all-reduce"),),
        thresholds={model.Metric.BUS_BANDWIDTH_GBPS: "value >= 300.0"},  # the seeded log: 338.82 GB/s
        target=model.Target(node_selector={"nvidia.com/gpu.present": "true"}),
        ranks_per_node=kubernetes.default_ranks_per_node(nodes),
        timeouts=model.Timeouts(run_timeout_seconds=60, stall_timeout_seconds=60),
    )
    with kubernetes.KubernetesExecutor(simulated_containers, nodes) as executor:
        result = engine.certify(spec, executor)

    assert result.failed_nodes == [BAD_NODE]
    failure = result.node_verdicts[BAD_NODE].failure
    assert failure is not None
    assert failure.reason is model.Reason.NETWORK_ERROR
    assert failure.exit_code == 1
    assert "NCCL" in failure.message and any("Test NCCL failure" in line for line in failure.evidence)
    category = result.categories[0]
    assert category.isolation is not None and BAD_NODE in category.isolation.faulty

    seen = simulated_containers.seen
    assert {p.node_name for p in seen} == {n.name for n in nodes}
    for pod in seen:  # every pod ran on the node its Job pinned it to, with every GPU of it
        assert pod.node_selector == {kubernetes.HOSTNAME_LABEL: pod.node_name}
        assert pod.gpus == "8"
    by_run: dict[str, list[Any]] = {}
    for pod in seen:
        by_run.setdefault(pod.run, []).append(pod)
    in_order = sorted(by_run, key=lambda name: int(name.rsplit("-", 1)[1]))  # dsx-<id>-<sequence>
    screening = [by_run[name] for name in in_order[: len(category.groups)]]
    assert sorted(sorted(p.node_name for p in pods) for pods in screening) == sorted(
        sorted(g.group.nodes) for g in category.groups
    )
    for pods in by_run.values():  # one Job per node, the launcher on node rank 0
        assert len({p.job for p in pods}) == len(pods)
        assert [p.role for p in pods].count("launcher") == 1
    assert _leftovers(kube_client, sim_namespace, executor.certification_id) == []


def _dsx(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    return subprocess.run([sys.executable, "-m", "dsx", *args], capture_output=True, text=True, timeout=120, env=env)


def test_cli_runs_jobs_on_selected_nodes_reports_and_cleans_up(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    common = ["certify", "run", "--executor", "kubernetes", "--namespace", sim_namespace]
    rack = ["--node-selector", "topology.dsx.run/rack=rack-01", "--categories", "nccl-all-reduce"]
    dry = [*common, *rack, "--dry-run", "--run-id", "plan1"]
    first, second = _dsx(*dry, kubeconfig=sim_cluster.kubeconfig), _dsx(*dry, kubeconfig=sim_cluster.kubeconfig)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout  # the same plan, byte for byte
    objects = serialization.parse_yaml_documents(first.stdout, source="dry run")
    jobs = [o for o in objects if o["kind"] == "Job"]
    pinned = [j["spec"]["template"]["spec"]["nodeSelector"][kubernetes.HOSTNAME_LABEL] for j in jobs]
    assert pinned == ["gpu-node-04", "gpu-node-05"]
    limits = jobs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}  # EKS nodes: EFA platform
    assert _leftovers(kube_client, sim_namespace, "plan1") == []

    report = tmp_path / "report.json"
    done = _dsx(
        *common, *rack, "--no-isolate", "--run-id", "cli1", "--output", str(report),
        "--kubeconfig", str(sim_cluster.kubeconfig), kubeconfig=Path("/nonexistent"),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # kwok containers print nothing: no result table
    document = json.loads(report.read_text())
    assert document["executor"] == "kubernetes"
    failed = {n["name"]: n for n in document["nodeResults"] if n["status"] == "FAILED"}
    assert sorted(failed) == ["gpu-node-04", "gpu-node-05"]
    assert {n["reason"] for n in failed.values()} == {"WorkloadFailed"}
    assert (tmp_path / "report.html").exists()
    assert _leftovers(kube_client, sim_namespace, "cli1") == []


def test_cleanup_deletes_what_an_interrupted_certification_left(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str
) -> None:
    nodes = certify_jobs.candidate_nodes(kube_client)
    launcher = RunLauncher(kube_client, namespace=sim_namespace)
    executor = kubernetes.KubernetesExecutor(launcher, nodes, certification_id="gone1")
    run = engine.plan(
        model.Certification(target=model.Target(node_names=("gpu-node-00", "gpu-node-01")), ranks_per_node=8),
        executor,
    )[0]
    launcher.create("dsx-gone1-1", executor.render(run, "dsx-gone1-1"))  # as if the process died here
    assert len(_leftovers(kube_client, sim_namespace, "gone1")) >= 3  # two Jobs and the Service
    args = ["certify", "cleanup", "--run-id", "gone1", "--namespace", sim_namespace]
    done = _dsx(*args, kubeconfig=sim_cluster.kubeconfig)
    assert done.returncode == 0, done.stderr
    assert "deleted" in done.stdout and "Job/dsx-gone1-1-0" in done.stdout
    again = _dsx(*args, kubeconfig=sim_cluster.kubeconfig)
    assert again.returncode == 0 and "deleted 0 object(s)" in again.stderr
    assert kube_client.wait_for(
        lambda: {"left": _leftovers(kube_client, sim_namespace, "gone1")},
        lambda found: found["left"] == [],
        what="certification objects deleted",
    )
