"""Area of concern: re-certification on a real cluster runs on the node itself — the Kubernetes
executor's Jobs pinned to the node, asking for all its GPUs, tolerating the sentinel's own cordon and
taints (and nothing else), judged by thresholds — and the sentinel refuses to start on a real cluster
when it could only stand in for the node; the choice of real or simulated lives in one module."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from dsx import logs
from dsx.cli.main import main
from dsx.controllers import sentinel_wiring
from dsx.errors import BadInputError
from dsx.executors import recertify as recertifiers
from dsx.health.decisions import policy as policy_module
from dsx.health.decisions import recertify
from dsx.health.decisions.policy import Stage
from dsx.health.decisions.ports import RecertificationRequest, Taint, TaintEffect
from dsx.model import certification as model
from dsx.testing.fake_executor import FakeJobLauncher

from .builders import policy_with

SRC = Path(__file__).resolve().parents[4] / "src" / "dsx"
DATA = Path(__file__).resolve().parents[3] / "data" / "certify"
NCCL_LOG = (DATA / "01-allreduce-h100-2node-gcp-a3mega.log").read_text(encoding="utf-8")
"""A healthy H100 all-reduce table (judged on nccl-tests' own out-of-place busbw: 338.82 GB/s)."""
LOOPBACK = RecertificationRequest("n3", ("nccl-loopback",))
H100 = "NVIDIA-H100-80GB-HBM3"


def _policy(threshold: str) -> policy_module.SentinelPolicy:
    chosen = policy_with(Stage.QUARANTINE, Stage.RECERTIFY)
    certification = dataclasses.replace(
        chosen.certification,
        categories=(policy_module.CategoryChoice("nccl-loopback"),),
        image="registry.example/dsx-workload:1",
        thresholds={model.Metric.BUS_BANDWIDTH_GBPS: threshold},
        run_timeout_seconds=60,
    )
    return dataclasses.replace(chosen, certification=certification)


def _fleet() -> list[model.CandidateNode]:
    return [
        model.CandidateNode("n3", unschedulable=True, allocatable_gpus=8, gpu_product=H100),  # cordoned by us
        model.CandidateNode("n4", allocatable_gpus=8, gpu_product=H100),
    ]


def _recertifier(
    threshold: str, launcher: FakeJobLauncher, fleet: list[model.CandidateNode] | None = None
) -> recertifiers.ClusterRecertifier:
    chosen = _policy(threshold)
    return recertifiers.ClusterRecertifier(
        chosen.certification,
        launcher,
        lambda: fleet if fleet is not None else _fleet(),
        tolerations=recertify.held_tolerations(chosen),
    )


def test_a_cordoned_node_is_certified_in_a_trainjob_pinned_to_it_with_every_gpu_and_our_tolerations() -> None:
    launcher = FakeJobLauncher(logs_by_node={"n3": NCCL_LOG})
    result = _recertifier("value >= 300.0", launcher).recertify(LOOPBACK)

    assert result.passed, result.reason
    assert result.detail["executor"] == "kubernetes" and result.detail["engine"] == "trainer"
    (run,) = launcher.created
    assert launcher.nodes_of(run) == ["n3"]  # the node itself, not a stand-in
    (trainjob,) = [o for o in launcher.created[run] if o["kind"] == "TrainJob"]
    trainer = trainjob["spec"]["trainer"]
    assert trainer["command"][2].endswith("/all_reduce_perf_mpi")  # nccl-tests itself, one process, every GPU
    assert trainer["command"][-1] == "-g8"
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "8"
    assert [r["kind"] for r in launcher.applied] == ["TrainingRuntime"]  # the certification's own runtime copy
    pod = trainjob["spec"]["podTemplateOverrides"][0]["spec"]
    tolerated = {(t["key"], t["effect"]) for t in pod["tolerations"]}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerated  # the sentinel's cordon
    assert ("sentinel.dsx.run/not-yet-certified", "NoSchedule") in tolerated
    assert launcher.deleted == [run]


def test_a_node_below_the_threshold_fails_with_the_measured_value() -> None:
    launcher = FakeJobLauncher(logs_by_node={"n3": NCCL_LOG})
    result = _recertifier("value >= 400.0", launcher).recertify(LOOPBACK)
    assert not result.passed
    assert result.reason.startswith("nccl-loopback: ThresholdViolation: busBandwidthGBps measured 338.82")


def test_a_pod_that_printed_nothing_fails_and_a_vanished_node_fails() -> None:
    silent = _recertifier("value >= 300.0", FakeJobLauncher())
    assert not silent.recertify(LOOPBACK).passed
    launcher = FakeJobLauncher()
    gone = _recertifier("value >= 300.0", launcher, fleet=[]).recertify(LOOPBACK)
    assert not gone.passed and "no longer in the cluster" in gone.reason
    assert launcher.created == {}


def test_a_joining_node_runs_alone_then_beside_its_known_good_peer() -> None:
    launcher = FakeJobLauncher(logs_by_node={"n3": NCCL_LOG, "n4": ""})
    joining = RecertificationRequest("n3", ("nccl-loopback",), peers=("n4",), group_categories=("nccl-all-reduce",))
    result = _recertifier("value >= 300.0", launcher).recertify(joining)
    assert result.passed, result.reason
    assert [launcher.nodes_of(run) for run in launcher.created] == [["n3"], ["n3", "n4"]]  # rank 0: the new node
    assert result.detail["peers"] == ["n4"]


def test_a_rerun_of_the_same_request_first_removes_what_an_interrupted_attempt_left() -> None:
    launcher = FakeJobLauncher(logs_by_node={"n3": NCCL_LOG})
    recertifier = _recertifier("value >= 300.0", launcher)
    stored = dataclasses.replace(LOOPBACK, request_id=7)
    assert recertifier.recertify(stored).passed
    (name,) = launcher.created  # the same names on every attempt of request 7
    launcher.deleted.clear()
    assert recertifier.recertify(stored).passed  # as after a restart that cut the first attempt short
    assert list(launcher.created) == [name]
    assert launcher.deleted == [name, name]  # the leftover before the run, the run itself after it
    recertifier.recertify(dataclasses.replace(stored, request_id=8))
    assert len(launcher.created) == 2  # another request: other names


def test_tolerations_cover_what_the_sentinel_holds_a_node_with_and_nothing_else() -> None:
    chosen = policy_with()
    rule = policy_module.RuleSet("gpu-fault", taints=(Taint("example.com/broken", TaintEffect.NO_EXECUTE),))
    chosen = dataclasses.replace(chosen, quarantine=policy_module.QuarantineSettings(rule_sets=(rule, rule)))
    assert recertify.held_tolerations(chosen) == [
        {"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "sentinel.dsx.run/not-yet-certified", "operator": "Exists", "effect": "NoSchedule"},
    ]


@pytest.mark.parametrize("stage", [Stage.RECERTIFY, Stage.VALIDATION])
def test_a_real_cluster_without_a_workload_image_is_refused_never_stood_in_for(stage: Stage) -> None:
    refused = f"{stage.value} would certify nodes of a real cluster.*certification.image"
    with pytest.raises(BadInputError, match=refused):
        sentinel_wiring.real(policy_with(stage), Path("/nonexistent/kubeconfig"))


def test_the_command_refuses_to_start_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "configure", lambda *_: None)  # keep pytest's logging as it is
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    args = ["sentinel", "run", "--kubeconfig", str(kubeconfig), "--enable", "quarantine,recertify"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--store", "memory:", "--state-dir", str(tmp_path / "state")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "no workload image is configured" in err and "--image" in err


def test_the_policy_reads_the_cluster_certification_settings() -> None:
    document = {
        "apiVersion": policy_module.API_VERSION,
        "kind": policy_module.KIND,
        "certification": {
            "image": "registry.example/w:2",
            "namespace": "gpu-certify",
            "interconnect": "efa",
            "thresholds": {"busBandwidthGBps": "value >= 420.0"},
        },
    }
    settings = policy_module.from_dict(document, source="p.yaml").certification
    assert (settings.image, settings.namespace, settings.interconnect) == ("registry.example/w:2", "gpu-certify", "efa")
    assert settings.thresholds == {model.Metric.BUS_BANDWIDTH_GBPS: "value >= 420.0"}
    assert policy_module.from_dict({**document, "certification": {}}, source="p.yaml").certification.namespace == (
        "dsx-runs"
    )
    for bad, message in (
        ({"thresholds": {"speed": "value > 1"}}, "thresholds: metric: 'speed' is not allowed; allowed values: busBa"),
        ({"thresholds": {"busBandwidthGBps": "value >>"}}, "p.yaml.certification.thresholds.busBandwidthGBps"),
        ({"namespace": "Not_A_Name"}, "p.yaml.certification.namespace: 'Not_A_Name' is not a namespace name"),
    ):
        with pytest.raises(BadInputError, match=message):
            policy_module.from_dict({**document, "certification": bad}, source="p.yaml")


def test_only_the_composition_root_imports_the_simulator() -> None:
    importers = []
    for path in sorted([*SRC.joinpath("controllers").glob("*.py"), *SRC.joinpath("health").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n == "dsx.sim" or n.startswith("dsx.sim.") for n in names):
                importers.append(path.relative_to(SRC).as_posix())
    assert sorted(set(importers)) == ["controllers/sentinel_wiring.py"]
