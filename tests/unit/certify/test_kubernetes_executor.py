"""Area of concern: the Kubernetes executor renders each run as a TrainJob (nccl-tests under
mpirun, nccl-tests alone on one node, Megatron-LM) pinned one pod per node with the node's GPUs,
the fabric's devices, image and variables, or as plain Jobs running the builtin worker; turns pod
exits into outcomes, times out pods still running at the deadline, and deletes everything it
created — also when interrupted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dsx.certify import engine, platforms
from dsx.certify.executor import WorkloadRun
from dsx.errors import BadInputError, UnavailableError
from dsx.executors import kubernetes
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog
from dsx.testing.fake_executor import FakeJobLauncher

EFA_NODES = [
    model.CandidateNode(f"gpu-{i}", allocatable_gpus=8, network_devices={"vpc.amazonaws.com/efa": 32}) for i in range(4)
]
TIMEOUTS = model.Timeouts(run_timeout_seconds=30, stall_timeout_seconds=30)


def _run(nodes: tuple[str, ...] = ("gpu-2", "gpu-0"), category: str = "nccl-all-reduce", **kw: object) -> WorkloadRun:
    chosen = catalog.get(category)
    members = [n for n in EFA_NODES if n.name in nodes]
    fabric = platforms.fabric(members, accelerator="h100", scale=chosen.scale)
    return WorkloadRun(
        f"{category}/all-nodes",
        chosen,
        nodes,
        8,
        TIMEOUTS,
        program=chosen.program,
        fabric=fabric,
        accelerator="h100",
        **kw,  # type: ignore[arg-type]
    )


def _jobs(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] == "Job"]


def test_a_trainjob_pins_one_pod_per_node_with_every_gpu_the_fabric_devices_and_mpirun() -> None:
    (trainjob,) = kubernetes.render_trainjob(
        _run(), "dsx-ab12-1", nodes={n.name: n for n in EFA_NODES}, certification_id="ab12"
    )
    spec = trainjob["spec"]
    assert spec["runtimeRef"] == {
        "name": "dsx-nccl-tests-ab12",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
    }
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 8
    assert trainer["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert trainer["image"].startswith("public.ecr.aws/hpc-cloud/nccl-tests:")  # EFA: aws-ofi-nccl inside
    line = trainer["command"][2]
    assert "/opt/amazon/openmpi/bin/mpirun --allow-run-as-root -N 8" in line
    assert "-x FI_EFA_USE_DEVICE_RDMA -x FI_PROVIDER -x NCCL_DEBUG -x NCCL_SOCKET_IFNAME" in line
    assert line.endswith("/opt/nccl-tests/build/all_reduce_perf -b8 -e17179869184 -f2 -n100 -w5")
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["NCCL_DEBUG"] == "INFO" and env["FI_PROVIDER"] == "efa"
    override = spec["podTemplateOverrides"][0]
    assert [t["name"] for t in override["targetJobs"]] == ["node", "launcher"]
    affinity = override["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["gpu-2", "gpu-0"]
    anti = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert override["metadata"]["labels"][kubernetes.CERTIFICATION_LABEL] == "ab12"


def test_loopback_runs_the_binary_alone_on_every_gpu_and_training_runs_megatron() -> None:
    nodes = {n.name: n for n in EFA_NODES}
    (loopback,) = kubernetes.render_trainjob(_run(("gpu-1",), "nccl-loopback"), "r1", nodes=nodes, certification_id="x")
    assert loopback["spec"]["runtimeRef"]["name"] == "dsx-torch-x"
    # one node reaches no network: the default nccl-tests image, not the EFA one with aws-ofi-nccl
    assert loopback["spec"]["trainer"]["command"][2:3] == ["/usr/local/bin/all_reduce_perf_mpi"]
    assert loopback["spec"]["trainer"]["command"][-1] == "-g8"
    (training,) = kubernetes.render_trainjob(
        _run(("gpu-1", "gpu-2"), "training"), "r2", nodes=nodes, certification_id="x"
    )
    command = training["spec"]["trainer"]["command"]
    assert command[:2] == ["torchrun", "/workspace/megatron-lm/pretrain_gpt.py"]
    assert "--tensor-model-parallel-size=2" in command  # H100: NVCRE's nemotron5-8b TP
    assert "--global-batch-size=16" in command and "--mock-data" in command
    assert training["spec"]["runtimeRef"]["name"] == "dsx-megatron-lm-x"


def test_runtime_copies_carry_the_fabric_image_everywhere_and_the_gang_scheduler() -> None:
    executor = kubernetes.KubernetesExecutor(
        FakeJobLauncher(), EFA_NODES, certification_id="cd", gang=kubernetes.GangScheduler("kai-scheduler")
    )
    (runtime,) = executor.runtimes_for([_run()])
    assert runtime["kind"] == "TrainingRuntime" and runtime["metadata"]["name"] == "dsx-nccl-tests-cd"
    assert runtime["metadata"]["labels"][kubernetes.CERTIFICATION_LABEL] == "cd"
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = replicated["template"]["spec"]["template"]
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
        assert {c["image"] for c in pod["spec"]["containers"]} == {
            executor.render(_run(), "n")[0]["spec"]["trainer"]["image"]
        }


def test_the_jobs_fallback_pins_one_job_per_node_running_the_builtin_worker() -> None:
    run = dataclasses.replace(_run(), program=model.Program.BUILTIN)
    objects = kubernetes.render_jobs(run, "dsx-ab12-1", nodes={n.name: n for n in EFA_NODES}, certification_id="ab12")
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
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_DEBUG"] == "INFO"
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    for obj in objects:
        assert obj["metadata"]["labels"][kubernetes.CERTIFICATION_LABEL] == "ab12"


def test_one_function_picks_the_pod_setup_and_the_thresholds_from_the_nodes() -> None:
    plain = [model.CandidateNode("a"), model.CandidateNode("b")]
    efa = platforms.fabric(EFA_NODES, accelerator="h100", scale=model.Scale.FULL_SCALE)
    assert (efa.platform.name, efa.interconnect, efa.expected) == ("efa", "efa", {model.Transport.NET_OFI})
    mixed = platforms.fabric([*EFA_NODES, *plain], accelerator="h100", scale=model.Scale.FULL_SCALE)
    assert mixed.platform.name == "tcp" and mixed.expected == frozenset()
    named = platforms.fabric(plain, accelerator="h100", scale=model.Scale.FULL_SCALE, requested="infiniband")
    assert named.platform.name == "infiniband" and not named.detected
    one = platforms.fabric(EFA_NODES[:1], accelerator="h100", scale=model.Scale.INTRA_NODE)
    assert one.interconnect == "nvlink" and one.expected == {model.Transport.P2P, model.Transport.NVLS}
    clique = [model.CandidateNode(f"g{i}", labels={"nvidia.com/gpu.clique": "u.1"}) for i in range(2)]
    assert platforms.fabric(clique, accelerator="gb200", scale=model.Scale.INTRA_GROUP).interconnect == "mnnvl"
    with pytest.raises(BadInputError, match="interconnect"):
        platforms.fabric(plain, accelerator="h100", scale=model.Scale.FULL_SCALE, requested="carrier-pigeon")
    assert kubernetes.default_ranks_per_node(EFA_NODES) == 8
    assert kubernetes.default_ranks_per_node(plain) == 1


def test_efa_shaped_nodes_without_an_interconnect_get_the_efa_thresholds() -> None:
    """Issue 27: the platform the pods are set up for is the one the thresholds are chosen for."""
    launcher = FakeJobLauncher()
    spec = model.Certification(target=model.Target(node_names=("gpu-0", "gpu-1")), ranks_per_node=8)
    with kubernetes.KubernetesExecutor(
        launcher, [dataclasses.replace(n, gpu_product="NVIDIA-H100-80GB-HBM3") for n in EFA_NODES]
    ) as executor:
        result = engine.certify(spec, executor)
    (category,) = result.categories
    assert category.interconnect == "efa"
    assert category.applied[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 439.0"
    (trainjob,) = [o for objects in launcher.created.values() for o in objects if o["kind"] == "TrainJob"]
    assert "vpc.amazonaws.com/efa" in trainjob["spec"]["trainer"]["resourcesPerNode"]["limits"]


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
    executor.close()
    assert launcher.deleted_labelled == [{kubernetes.CERTIFICATION_LABEL: "cd34"}]  # the runtime copy goes too


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


def _added_capabilities(runtime: dict) -> set[tuple[str, ...]]:
    pods = [r["template"]["spec"]["template"]["spec"] for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]]
    containers = [c for pod in pods for c in [*pod.get("initContainers", []), *pod["containers"]]]
    return {tuple(c.get("securityContext", {}).get("capabilities", {}).get("add", ())) for c in containers}


def test_one_node_runs_set_their_pods_up_without_the_network_so_baseline_pod_security_admits_them() -> None:
    """Issue 29: the sentinel's namespace enforces baseline, which refuses IPC_LOCK; a one-node run
    reaches no network, so it neither requests the NICs nor adds IPC_LOCK. A multi-node one still
    does, and the runtime copy it shares is applied again with it."""
    launcher = FakeJobLauncher()
    nodes = {n.name: n for n in EFA_NODES}
    executor = kubernetes.KubernetesExecutor(launcher, EFA_NODES, certification_id="pq")
    one = _run(("gpu-1",), "nccl-loopback")
    assert one.fabric is not None and one.fabric.one_node and "one node" in one.fabric.describe()
    (loopback,) = kubernetes.render_trainjob(one, "r1", nodes=nodes, certification_id="pq")
    assert loopback["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8"}
    (runtime,) = executor.runtimes_for([one])
    assert _added_capabilities(runtime) == {()}
    job_pod = _jobs(kubernetes.render_jobs(one, "r1", nodes=nodes, certification_id="pq"))[0]["spec"]["template"]
    assert "securityContext" not in job_pod["spec"]["containers"][0]
    shipped = next(r for r in kubernetes.shipped_runtimes() if r["metadata"]["name"] == "dsx-torch")
    assert ("IPC_LOCK",) in _added_capabilities(shipped)  # the bundle's own runtime keeps it for users' jobs

    executor.run([one])
    executor.run([_run(("gpu-1", "gpu-2"), "nccl-all-reduce")])
    executor.run([_run(("gpu-1", "gpu-2"), "nccl-all-reduce")])
    names = [r["metadata"]["name"] for r in launcher.applied]
    assert names == ["dsx-torch-pq", "dsx-nccl-tests-pq"]  # the same copy twice is applied once
    multi = executor.runtimes_for([_run(("gpu-1", "gpu-2"), "nccl-all-reduce"), one])
    assert {name: _added_capabilities(r) for name, r in ((r["metadata"]["name"], r) for r in multi)} == {
        "dsx-nccl-tests-pq": {("IPC_LOCK",)},
        "dsx-torch-pq": {()},
    }
