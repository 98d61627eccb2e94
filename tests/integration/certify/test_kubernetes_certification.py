"""Area of concern: `--executor kubernetes` on a real apiserver (dsx sim with the real Kubeflow
Trainer and JobSet controllers) runs each workload as a TrainJob → JobSet → Jobs → pods pinned
to its nodes, isolates a slow node, ends runs whose pods cannot start within seconds with the
reason, stops at a common cause, renders only objects the apiserver (and Trainer's webhooks)
accept, and leaves nothing behind; the sentinel's re-certification goes through the same path.

Pods are kwok pods: the Trainer and JobSet controllers, the scheduler, the Job controller and pod
logs through the apiserver are real; what the results pod would print comes from
`SimulatedContainers`, which seeds collected real nccl-tests and Megatron-LM logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.certify import engine
from dsx.executors import kubernetes
from dsx.executors import recertify as recertifiers
from dsx.health.decisions import policy as policy_module
from dsx.health.decisions.ports import RecertificationRequest
from dsx.kube import certify_jobs
from dsx.kube.client import KubeClient
from dsx.kube.jobs import RunLauncher
from dsx.model import certification as model
from dsx.sim import binaries

from .simulated_containers import SimulatedContainers, sample

pytestmark = pytest.mark.integration

BAD_NODE = "gpu-node-03"
HEALTHY = sample("01-allreduce-h100-2node-gcp-a3mega.log", "nccl")
"""2×8 H100 (GCP A3 Mega), out-of-place busbw 338.82 GB/s at 8 GiB."""
SLOW = sample("11-allreduce-h100-2node-tree-low-busbw.log", "nccl")
"""H100 over 4 NICs, tree all-reduce, out-of-place busbw at most 41.31 GB/s: a node far below its peers."""
MEGATRON = sample("01-megatron-lm-mixtral8x7b-16xH100.log", "training")
BAR = {model.Metric.BUS_BANDWIDTH_GBPS: "value >= 300.0"}
"""The seeded logs are GCP TCPXO runs, the sim's nodes EKS/EFA-shaped: EFA's published figure
(439 GB/s) judges only EFA runs, so these runs state their own bar."""


def _log_for(nodes: tuple[str, ...], runtime: str) -> str:
    if runtime.startswith("dsx-megatron-lm-"):
        return MEGATRON
    return SLOW if BAD_NODE in nodes else HEALTHY


@pytest.fixture
def containers(sim_cluster: Any, kube_client: KubeClient, sim_namespace: str) -> SimulatedContainers:
    return SimulatedContainers(
        inner=RunLauncher(kube_client, namespace=sim_namespace, poll_seconds=0.2),
        cluster=sim_cluster.cluster,
        kube=kube_client,
        log_for=_log_for,
    )


def _leftovers(kube: KubeClient, namespace: str, certification_id: str) -> list[str]:
    labels = {kubernetes.CERTIFICATION_LABEL: certification_id}
    kinds = (
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
        ("v1", "Service"),
    )
    return [
        f"{kind}/{obj['metadata']['name']}"
        for api_version, kind in kinds
        for obj in kube.list(api_version, kind, namespace, labels=labels)
    ]


def _gone(kube: KubeClient, namespace: str, certification_id: str) -> bool:
    kube.wait_for(
        lambda: {"left": _leftovers(kube, namespace, certification_id)},
        lambda found: found["left"] == [],
        what="certification objects deleted",
        timeout_seconds=60,
    )
    return True


def _executor(containers: SimulatedContainers, nodes: list[model.CandidateNode], **kw: Any) -> Any:
    choice = certify_jobs.choose_engine(containers.kube)
    assert choice.engine is kubernetes.Engine.TRAINER, choice.note  # the sim runs the real engine
    return kubernetes.KubernetesExecutor(containers, nodes, engine=choice.engine, **kw)


def test_trainjobs_on_the_real_engine_isolate_the_slow_node_and_leave_nothing(
    containers: SimulatedContainers, kube_client: KubeClient, sim_namespace: str
) -> None:
    nodes = certify_jobs.candidate_nodes(kube_client)
    spec = model.Certification(
        categories=(model.CategoryRequest("nccl-all-reduce", thresholds=BAR), model.CategoryRequest("training")),
        target=model.Target(node_selector={"nvidia.com/gpu.present": "true"}),
        ranks_per_node=kubernetes.default_ranks_per_node(nodes),
        timeouts=model.Timeouts(run_timeout_seconds=120, stall_timeout_seconds=120),
    )
    with _executor(containers, nodes) as executor:
        result = engine.certify(spec, executor)

    assert result.failed_nodes == [BAD_NODE], [v.to_dict() for v in result.node_verdicts.values()]
    failure = result.node_verdicts[BAD_NODE].failure
    assert failure is not None and failure.reason is model.Reason.THRESHOLD_VIOLATION
    assert failure.measured == pytest.approx(41.31)  # nccl-tests' own out-of-place figure
    all_reduce, training = result.categories
    assert all_reduce.isolation is not None and BAD_NODE in all_reduce.isolation.faulty
    assert all_reduce.workload_id == "nccl-tests/all_reduce_perf"
    assert training.workload_id == "megatron-lm/nemotron5-8b" and training.status is model.Status.PASSED
    assert "judged against the peers" in training.lacking  # no published figure for this model

    for run, kinds in containers.kinds.items():  # TrainJob → JobSet → Job → Pod, by the real controllers
        assert kinds == {"TrainJob", "JobSet", "Job", "Pod"}, run
    mpi = [p for p in containers.seen if p.replicated_job == "launcher"]
    assert mpi and all(p.gpus == "8" for p in containers.seen)
    by_run: dict[str, list[str]] = {}
    for pod in containers.seen:
        by_run.setdefault(pod.run, []).append(pod.node_name)
    for run, placed in by_run.items():  # one pod per node, each on a node of its run
        assert len(placed) == len(set(placed)) and set(placed) <= set(containers.nodes[run]), run
    assert _gone(kube_client, sim_namespace, executor.certification_id)


def test_every_object_of_a_dry_run_is_accepted_by_the_apiserver_and_trainers_webhooks(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    args = ["certify", "run", "--executor", "kubernetes", "--namespace", sim_namespace, "--dry-run", "--run-id", "dry1"]
    args += ["--categories", "nccl-all-reduce,nccl-loopback,training"]
    first, second = _dsx(*args, kubeconfig=sim_cluster.kubeconfig), _dsx(*args, kubeconfig=sim_cluster.kubeconfig)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout  # the same plan, byte for byte
    objects = serialization.parse_yaml_documents(first.stdout, source="dry run")
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == ["TrainJob", "TrainingRuntime"]
    trainjobs = [o for o in objects if o["kind"] == "TrainJob"]
    mpi = next(t for t in trainjobs if t["spec"]["runtimeRef"]["name"].startswith("dsx-nccl-tests-"))
    assert "/opt/nccl-tests/build/all_reduce_perf" in mpi["spec"]["trainer"]["command"][2]  # EFA's image and path
    assert mpi["spec"]["trainer"]["resourcesPerNode"]["limits"] == {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
    }
    env = {e["name"]: e.get("value") for e in mpi["spec"]["trainer"]["env"]}
    assert env["NCCL_DEBUG"] == "INFO" and env["FI_PROVIDER"] == "efa"

    plan = tmp_path / "plan.yaml"
    plan.write_text(first.stdout, encoding="utf-8")
    runtimes = tmp_path / "runtimes.yaml"
    runtimes.write_text(serialization.dump_yaml_documents([o for o in objects if o["kind"] == "TrainingRuntime"]))
    kubectl = str(binaries.resolve(allow_build=False)["kubectl"])
    env = dict(os.environ, KUBECONFIG=str(sim_cluster.kubeconfig))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl, *argv], capture_output=True, text=True, timeout=120, env=env, check=False)

    # TrainJobs name runtimes Trainer's webhook looks up: the runtimes exist first, as a run makes them
    created = run("apply", "--server-side", "-f", str(runtimes))
    assert created.returncode == 0, created.stderr
    checked = run("apply", "--server-side", "--dry-run=server", "-f", str(plan))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count("(server dry run)") == len(objects)
    removed = _dsx(
        "certify", "cleanup", "--run-id", "dry1", "--namespace", sim_namespace, kubeconfig=sim_cluster.kubeconfig
    )
    assert removed.returncode == 0, removed.stderr
    assert _gone(kube_client, sim_namespace, "dry1")


def test_an_unschedulable_pod_ends_its_run_within_30_s_with_the_reason(
    containers: SimulatedContainers, kube_client: KubeClient, sim_namespace: str
) -> None:
    hog = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-hog", "namespace": sim_namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": BAD_NODE},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "hog", "image": "hog", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
    }
    kube_client.apply(hog)
    kube_client.wait_for(
        lambda: kube_client.get("v1", "Pod", "gpu-hog", sim_namespace),
        lambda pod: pod.get("status", {}).get("phase") == "Running",
        what="the pod holding every GPU of the node",
    )
    nodes = certify_jobs.candidate_nodes(kube_client)
    spec = model.Certification(
        categories=(model.CategoryRequest("nccl-loopback", thresholds=BAR),),
        target=model.Target(node_names=(BAD_NODE, "gpu-node-04")),
        ranks_per_node=8,
        isolate=False,
        timeouts=model.Timeouts(run_timeout_seconds=3600, stall_timeout_seconds=3600),  # the default deadline
    )
    notices: list[str] = []
    started = time.monotonic()
    with _executor(containers, nodes) as executor:
        result = engine.certify(spec, executor, progress=lambda event: notices.append(event.message))
    took = time.monotonic() - started
    assert took < 30, took
    failure = result.node_verdicts[BAD_NODE].failure
    assert failure is not None and failure.reason is model.Reason.NOT_STARTED
    assert "Unschedulable" in failure.message and "Insufficient nvidia.com/gpu" in failure.message
    assert any("Unschedulable" in line for line in notices)  # said while it happened, not only at the end
    assert result.node_verdicts["gpu-node-04"].status is model.Status.PASSED
    assert _gone(kube_client, sim_namespace, executor.certification_id)


def test_when_every_node_fails_alike_one_round_reports_the_common_cause(
    containers: SimulatedContainers, kube_client: KubeClient, sim_namespace: str
) -> None:
    containers.pod_annotations = {"sim.dsx.run/waiting-reason": "ImagePullBackOff"}
    nodes = certify_jobs.candidate_nodes(kube_client)
    spec = model.Certification(
        categories=(model.CategoryRequest("nccl-all-reduce", thresholds=BAR),),
        target=model.Target(node_selector={"nvidia.com/gpu.present": "true"}),
        ranks_per_node=8,
        timeouts=model.Timeouts(run_timeout_seconds=3600, stall_timeout_seconds=3600),
    )
    started = time.monotonic()
    with _executor(containers, nodes, image="registry.invalid/missing:1") as executor:
        result = engine.certify(spec, executor)
    (category,) = result.categories
    assert category.runs == len(category.groups)  # screening only: no bisection
    assert category.isolation is None and category.common_cause is not None
    assert "ImagePullBackOff" in category.common_cause.message
    assert {v.failure.reason for v in result.node_verdicts.values() if v.failure} == {model.Reason.COMMON_CAUSE}
    assert time.monotonic() - started < 60
    assert _gone(kube_client, sim_namespace, executor.certification_id)


def test_the_sentinels_recertification_runs_a_trainjob_on_the_node(
    containers: SimulatedContainers, kube_client: KubeClient, sim_namespace: str
) -> None:
    settings = policy_module.CertificationSettings(
        categories=(policy_module.CategoryChoice("nccl-loopback"),),
        image="registry.example/dsx-workload:1",
        namespace=sim_namespace,
        thresholds=dict(BAR),
        run_timeout_seconds=120,
    )
    recertifier = recertifiers.ClusterRecertifier(
        settings,
        containers,
        lambda: certify_jobs.candidate_nodes(kube_client),
        tolerations=(),
        choose_engine=lambda: certify_jobs.choose_engine(kube_client, gang="none"),
    )
    outcome = recertifier.recertify(RecertificationRequest("gpu-node-01", ("nccl-loopback",)))
    assert outcome.passed, outcome.reason
    assert outcome.detail["engine"] == "trainer"
    (run,) = containers.kinds
    assert containers.kinds[run] == {"TrainJob", "JobSet", "Job", "Pod"}
    assert {p.node_name for p in containers.seen} == {"gpu-node-01"}
    assert _gone(kube_client, sim_namespace, outcome.detail["certification_id"])


def _dsx(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    return subprocess.run([sys.executable, "-m", "dsx", *args], capture_output=True, text=True, timeout=180, env=env)


def test_the_jobs_fallback_runs_the_builtin_worker_reports_and_cleans_up(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    common = ["certify", "run", "--executor", "kubernetes", "--namespace", sim_namespace, "--engine", "jobs"]
    rack = ["--node-selector", "topology.dsx.run/rack=rack-01", "--categories", "nccl-all-reduce"]
    planned = _dsx(*common, *rack, "--dry-run", "--run-id", "plan1", kubeconfig=sim_cluster.kubeconfig)
    assert planned.returncode == 0, planned.stderr
    assert "plain Jobs (as asked)" in planned.stderr
    objects = serialization.parse_yaml_documents(planned.stdout, source="dry run")
    jobs = [o for o in objects if o["kind"] == "Job"]
    pinned = [j["spec"]["template"]["spec"]["nodeSelector"][kubernetes.HOSTNAME_LABEL] for j in jobs]
    assert pinned == ["gpu-node-04", "gpu-node-05"]
    container = jobs[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert "dsx.executors.local.worker" in container["command"]  # the builtin worker, said so

    report = tmp_path / "report.json"
    done = _dsx(
        *common, *rack, "--no-isolate", "--run-id", "cli1", "--output", str(report),
        "--kubeconfig", str(sim_cluster.kubeconfig), kubeconfig=Path("/nonexistent"),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # kwok containers print nothing: no result table
    document = json.loads(report.read_text())
    assert document["executor"] == "kubernetes"
    (category,) = document["categories"]
    assert category["ran"] == "builtin/all_reduce"
    failed = {n["name"]: n for n in document["nodeResults"] if n["status"] == "FAILED"}
    assert sorted(failed) == ["gpu-node-04", "gpu-node-05"]
    assert (tmp_path / "report.html").exists()
    assert _gone(kube_client, sim_namespace, "cli1")


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
    launcher.apply(executor.runtimes_for([run]))
    launcher.create("dsx-gone1-1", executor.render(run, "dsx-gone1-1"))  # as if the process died here
    assert len(_leftovers(kube_client, sim_namespace, "gone1")) >= 2  # the TrainJob and its runtime copy
    args = ["certify", "cleanup", "--run-id", "gone1", "--namespace", sim_namespace]
    done = _dsx(*args, kubeconfig=sim_cluster.kubeconfig)
    assert done.returncode == 0, done.stderr
    assert "deleted" in done.stdout and "TrainJob/dsx-gone1-1" in done.stdout
    again = _dsx(*args, kubeconfig=sim_cluster.kubeconfig)
    assert again.returncode == 0
    assert _gone(kube_client, sim_namespace, "gone1")
