"""Area of concern: `dsx validate --phase performance` certifies the cluster's GPU nodes through the
certify engine — TrainJobs pinned to the targeted nodes with the Kubernetes executor (the sim runs the
real Trainer and JobSet controllers), or local processes
standing in for the snapshot's GPU nodes with `--executor local` — and judges what it found.

The apiserver, scheduler, Job controller and pod logs are real (dsx sim); kwok pods run no
container, so on their own they print no nccl-tests table and every node fails with
`WorkloadFailed`, which the first test holds the CLI to. The second stands in for the containers
with certify's `SimulatedContainers` (seeded nccl-tests logs) on top of the real RunLauncher,
through the same composition the CLI uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.cli import validate_cmd
from dsx.cli.main import main
from dsx.executors import kubernetes
from dsx.files import documents
from dsx.kube.client import KubeClient
from dsx.kube.jobs import RunLauncher
from dsx.model import recipe as recipe_model
from dsx.validation import cluster_snapshot, performance, results, run
from integration.certify.simulated_containers import SimulatedContainers, sample

pytestmark = pytest.mark.integration

CRITERIA = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu"]
RACK_01 = {"topology.dsx.run/rack": "rack-01"}  # gpu-node-04 and gpu-node-05 of the 6-node cluster
BAD_NODE = "gpu-node-03"


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


def certified_recipe(tmp_path: Path, certification: dict[str, Any]) -> Path:
    """The resolved eks/h100/ubuntu recipe with its `certification:` block replaced."""
    resolved = tmp_path / "resolved.yaml"
    assert dsx("recipe", *CRITERIA, "-o", str(resolved)) == 0
    doc = documents.load_mapping_file(resolved)
    doc["certification"] = certification
    doc["metadata"].pop("digest", None)
    target = tmp_path / "certified.yaml"
    target.write_text(serialization.dump_yaml(recipe_model.Recipe.from_dict(doc, source=str(target)).to_dict()))
    return target


def leftovers(kube: KubeClient, namespace: str) -> list[str]:
    return [
        f"{kind}/{obj['metadata']['name']}"
        for api_version, kind in (
            ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
            ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"),
            ("batch/v1", "Job"),
            ("v1", "Pod"),
            ("v1", "Service"),
        )
        for obj in kube.list(api_version, kind, namespace, labels=None)
        if kubernetes.CERTIFICATION_LABEL in (obj["metadata"].get("labels") or {})
    ]


def test_kubernetes_executor_runs_a_job_per_targeted_node_and_fails_containers_that_print_nothing(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    block = {"categories": ["nccl-all-reduce"], "target": {"nodeSelector": RACK_01}, "isolate": False}
    block |= {"runTimeoutSeconds": 60}
    recipe_path = certified_recipe(tmp_path, block)
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", str(sim_cluster.kubeconfig)]
    args += ["--phase", "performance", "--namespace", sim_namespace, "--fail-on-error", "--output", str(report)]
    assert dsx(*args) == 1
    (check,) = json.loads(report.read_text())["results"]["tests"]
    assert check["name"] == "performance/nccl-all-reduce"
    assert check["status"] == "failed"
    evidence = check["extra"]["evidence"]
    assert evidence["executor"] == "kubernetes"
    assert evidence["nodes"] == ["gpu-node-04", "gpu-node-05"]
    assert {n: f["reason"] for n, f in evidence["failedNodes"].items()} == {
        "gpu-node-04": "WorkloadFailed",
        "gpu-node-05": "WorkloadFailed",
    }
    assert leftovers(kube_client, sim_namespace) == []


def test_kubernetes_executor_passes_healthy_nodes_and_names_the_faulty_one(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    block = {
        "categories": ["nccl-all-reduce"],
        "thresholds": {"busBandwidthGBps": "value >= 300.0"},  # the seeded log: 338.82 GB/s
        "runTimeoutSeconds": 60,
    }
    target = documents.recipe(str(certified_recipe(tmp_path, block)))
    failing: set[str] = set()
    healthy_log = sample("01-allreduce-h100-2node-gcp-a3mega.log")
    broken_log = sample("08-allreduce-h100-2node-init-failure-WARN.log")
    containers = SimulatedContainers(
        inner=RunLauncher(kube_client, namespace=sim_namespace, poll_seconds=0.2),
        cluster=sim_cluster.cluster,
        kube=kube_client,
        log_for=lambda nodes, _runtime: broken_log if failing & set(nodes) else healthy_log,
    )
    runner = performance.CertificationRunner(
        validate_cmd.kubernetes_certify(kube_client, containers, namespace=sim_namespace)
    )
    snap = cluster_snapshot.collect(kube_client, generator="dsx/test")

    def certify() -> results.Report:
        return run.validate(target, snap, phases=[results.Phase.PERFORMANCE], certification=runner, generator="t")

    healthy = certify()
    assert [(r.name, r.status) for r in healthy.results] == [("performance/nccl-all-reduce", results.Status.PASSED)]
    gpu_nodes = [n.name for n in snap.gpu_nodes]  # no target in the block: every GPU node, one pod on each
    assert healthy.results[0].evidence["nodes"] == gpu_nodes
    assert {n for nodes in containers.nodes.values() for n in nodes} == set(gpu_nodes)  # pinned there

    failing.add(BAD_NODE)  # its runs print an NCCL init failure on InfiniBand (`Test NCCL failure`)
    broken = certify()
    (check,) = broken.results
    assert check.status is results.Status.FAILED
    assert list(check.evidence["failedNodes"]) == [BAD_NODE]
    # the seeded log is an InfiniBand cluster's (`Using network IBext_v6`): on these EFA nodes that is the fallback
    assert f"{BAD_NODE}: TransportFallback" in check.message
    assert leftovers(kube_client, sim_namespace) == []


def test_local_executor_stands_in_for_the_snapshot_gpu_nodes(sim_cluster: Any, tmp_path: Path) -> None:
    recipe_path = certified_recipe(tmp_path, {"categories": ["nccl-loopback"], "target": {"nodeSelector": RACK_01}})
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(recipe_path), "--kubeconfig", str(sim_cluster.kubeconfig)]
    args += ["--phase", "performance", "--executor", "local", "--fail-on-error", "--output", str(report)]
    assert dsx(*args) == 0
    (check,) = json.loads(report.read_text())["results"]["tests"]
    assert (check["name"], check["status"]) == ("performance/nccl-loopback", "passed")
    assert check["extra"]["evidence"]["executor"] == "local"
    assert check["extra"]["evidence"]["nodes"] == ["gpu-node-04", "gpu-node-05"]
