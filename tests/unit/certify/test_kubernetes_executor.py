"""Area of concern: the Kubernetes executor renders one pinned Job per node with the node's GPUs
and the platform's network devices, turns pod exits into outcomes, times out pods still
running at the deadline, and deletes everything it created — also when interrupted."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.certify import engine
from dsx.certify.executor import WorkloadRun
from dsx.errors import UnavailableError
from dsx.executors import kubernetes
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog
from dsx.testing.fake_executor import FakeJobLauncher

EFA_NODES = [
    model.CandidateNode(f"gpu-{i}", allocatable_gpus=8, network_devices={"vpc.amazonaws.com/efa": 32}) for i in range(4)
]
TIMEOUTS = model.Timeouts(run_timeout_seconds=30, stall_timeout_seconds=30)


def _run(nodes: tuple[str, ...] = ("gpu-2", "gpu-0"), category: str = "nccl-all-reduce") -> WorkloadRun:
    return WorkloadRun(f"{category}/all-nodes", catalog.get(category), nodes, 8, TIMEOUTS)


def _jobs(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] == "Job"]


def test_each_node_gets_its_own_pinned_job_with_every_gpu_and_efa_device() -> None:
    objects = kubernetes.render(_run(), "dsx-ab12-1", nodes={n.name: n for n in EFA_NODES}, certification_id="ab12")
    service, *jobs = objects
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    assert [j["metadata"]["name"] for j in jobs] == ["dsx-ab12-1-0", "dsx-ab12-1-1"]
    pods = [j["spec"]["template"] for j in jobs]
    assert [p["spec"]["nodeSelector"] for p in pods] == [
        {"kubernetes.io/hostname": "gpu-2"},
        {"kubernetes.io/hostname": "gpu-0"},
    ]  # rank order is the run's node order
    assert [p["metadata"]["labels"][kubernetes.ROLE_LABEL] for p in pods] == ["launcher", "worker"]
    container = pods[1]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert container["command"][:6] == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=8",
        "--node-rank=1",
        "--master-addr=dsx-ab12-1-0.dsx-ab12-1",
        "--master-port=29500",
    ]
    assert "--max-bytes=17179869184" in container["command"]  # the cluster sweep (16G), not the CPU one
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    for obj in objects:
        assert obj["metadata"]["labels"][kubernetes.CERTIFICATION_LABEL] == "ab12"
    assert all(j["spec"]["backoffLimit"] == 0 for j in jobs)


def test_platform_follows_the_devices_every_node_has_unless_an_interconnect_is_named() -> None:
    plain = [model.CandidateNode("a"), model.CandidateNode("b")]
    assert kubernetes.platform_for(EFA_NODES).name == "efa"
    assert kubernetes.platform_for([*EFA_NODES, *plain]).name == "tcp"
    assert kubernetes.platform_for(plain, "infiniband").name == "infiniband"
    assert kubernetes.platform_for(EFA_NODES, "tcpxo").name == "tcp"  # no shipped platform for it: plain sockets
    assert kubernetes.default_ranks_per_node(EFA_NODES) == 8
    assert kubernetes.default_ranks_per_node(plain) == 1


def test_pod_exit_codes_and_logs_become_the_run_outcome_and_runs_are_deleted() -> None:
    launcher = FakeJobLauncher(codes={"gpu-0": 1}, logs_by_node={"gpu-2": "table", "gpu-0": "NCCL WARN boom"})
    executor = kubernetes.KubernetesExecutor(launcher, EFA_NODES, certification_id="cd34")
    (outcome,) = executor.run([_run()])
    assert outcome.exit_codes == {"gpu-2": 0, "gpu-0": 1}
    assert outcome.launcher_log == "table"
    assert outcome.node_logs["gpu-0"] == "NCCL WARN boom"
    assert not outcome.timed_out
    assert launcher.deleted == ["dsx-cd34-1"]
    assert launcher.nodes_of("dsx-cd34-1") == ["gpu-2", "gpu-0"]


def test_a_pod_still_running_at_the_deadline_makes_a_timeout() -> None:
    launcher = FakeJobLauncher(codes={"gpu-0": None})
    executor = kubernetes.KubernetesExecutor(launcher, EFA_NODES)
    (outcome,) = executor.run([_run()])
    assert outcome.timed_out
    assert outcome.exit_codes["gpu-0"] is None


def test_runs_handed_over_together_are_all_created_before_any_is_awaited() -> None:
    launcher = FakeJobLauncher()
    executor = kubernetes.KubernetesExecutor(launcher, EFA_NODES, certification_id="ef56")
    outcomes = executor.run([_run(("gpu-0", "gpu-1")), _run(("gpu-2", "gpu-3"))])
    assert [o.run.nodes for o in outcomes] == [("gpu-0", "gpu-1"), ("gpu-2", "gpu-3")]
    assert list(launcher.created) == ["dsx-ef56-1", "dsx-ef56-2"]
    assert launcher.deleted == ["dsx-ef56-1", "dsx-ef56-2"]


def test_an_interrupt_while_waiting_still_deletes_what_was_created() -> None:
    launcher = FakeJobLauncher(interrupt_on_wait=True)
    executor = kubernetes.KubernetesExecutor(launcher, EFA_NODES, certification_id="gh78")
    with pytest.raises(KeyboardInterrupt), executor:
        engine.certify(model.Certification(ranks_per_node=8), executor)
    assert launcher.deleted == ["dsx-gh78-1"]
    assert set(launcher.created) == {"dsx-gh78-1"}


def test_close_names_the_cleanup_command_when_deletion_fails() -> None:
    class Unreachable(FakeJobLauncher):
        def delete(self, run_name: str) -> None:
            raise UnavailableError("apiserver unreachable")

    executor = kubernetes.KubernetesExecutor(Unreachable(), EFA_NODES, certification_id="ij90")
    executor.run([_run()])
    with pytest.raises(UnavailableError, match="dsx certify cleanup --run-id ij90"):
        executor.close()


def test_a_certification_through_the_executor_reads_nccl_tables_from_the_launcher() -> None:
    sample = Path(__file__).resolve().parents[2] / "data" / "certify" / "01-allreduce-h100-2node-gcp-a3mega.log"
    table = sample.read_text().split("\n", 1)[1]  # max busbw 338.82 GB/s
    launcher = FakeJobLauncher(logs_by_node={"gpu-0": table})
    spec = model.Certification(
        target=model.Target(node_names=("gpu-0", "gpu-1")),
        ranks_per_node=8,
        thresholds={model.Metric.BUS_BANDWIDTH_GBPS: "value >= 300.0"},
    )
    with kubernetes.KubernetesExecutor(launcher, EFA_NODES) as executor:
        result = engine.certify(spec, executor)
    assert result.result is model.Result.PASSED, result.node_verdicts
    assert result.categories[0].calibration_runs == 0  # clusters are judged against published figures
