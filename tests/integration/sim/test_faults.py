"""Area of concern: `dsx sim inject` faults show up where a health monitor looks for them — node
conditions and taints on the apiserver, NVRM lines in the node's kernel log."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from dsx.kube.client import KubeClient

pytestmark = pytest.mark.integration


def _dsx(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsx", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _conditions(client: KubeClient, node: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in client.get_node(node)["status"]["conditions"]}


def test_not_ready_then_ready(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[5]
    done = _dsx("sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "not-ready")
    assert done.returncode == 0, done.stderr
    dropped = kube_client.wait_for(
        lambda: kube_client.get_node(node),
        lambda n: (
            _conditions(kube_client, node)["Ready"]["status"] == "False"
            and any(t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints") or [])
        ),
        what="node NotReady and tainted",
        timeout_seconds=60,
    )
    assert dropped["metadata"]["name"] == node
    assert _conditions(kube_client, node)["Ready"]["reason"] == "KubeletNotReady"

    done = _dsx("sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "ready")
    assert done.returncode == 0, done.stderr
    kube_client.wait_for(
        lambda: kube_client.get_node(node),
        lambda n: (
            _conditions(kube_client, node)["Ready"]["status"] == "True"
            and not any(t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints") or [])
        ),
        what="node Ready and untainted",
        timeout_seconds=60,
    )


def test_condition_fault_sets_a_node_condition(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[4]
    done = _dsx(
        "sim",
        "inject",
        "--name",
        sim_cluster.name,
        "--node",
        node,
        "--fault",
        "condition:GpuMemHealthy=False:RowRemapFailure",
    )
    assert done.returncode == 0, done.stderr
    condition = _conditions(kube_client, node)["GpuMemHealthy"]
    assert (condition["status"], condition["reason"]) == ("False", "RowRemapFailure")
    assert _conditions(kube_client, node)["Ready"]["status"] == "True"


def test_xid_and_sxid_lines_are_appended_to_the_node_kernel_log(kube_client: KubeClient, sim_cluster: Any) -> None:
    node = sim_cluster.node_names[3]
    log = sim_cluster.kernel_log(node)
    assert kube_client.get_node(node)["metadata"]["annotations"]["sim.dsx.run/kernel-log"] == str(log)
    before = log.read_text().splitlines()
    assert (
        _dsx("sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "xid79", "--gpu", "2").returncode
        == 0
    )
    assert (
        _dsx(
            "sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "xid:48", "--count", "3"
        ).returncode
        == 0
    )
    assert _dsx("sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "sxid:20034").returncode == 0
    added = log.read_text().splitlines()[len(before) :]
    assert len(added) == 5
    xid = re.compile(
        r"^kern  :warn  : \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}\+00:00 NVRM: Xid \(PCI:([0-9a-f:]+)\): (\d+), "
    )
    first = xid.match(added[0])
    assert first is not None and first.groups() == ("0000:3a:00", "79")
    assert added[0].endswith("GPU has fallen off the bus.")
    assert [xid.match(line).group(2) for line in added[1:4]] == ["48", "48", "48"]  # type: ignore[union-attr]
    assert "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1" in added[4]

    dry = _dsx("sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "xid:13", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.startswith("would append")
    assert len(log.read_text().splitlines()) == len(before) + 5


def test_bad_faults_are_refused_with_exit_codes(sim_cluster: Any) -> None:
    bad = _dsx("sim", "inject", "--name", sim_cluster.name, "--node", sim_cluster.node_names[0], "--fault", "melt")
    assert bad.returncode == 2
    assert "allowed values: not-ready, ready, condition:" in bad.stderr
    unknown = _dsx("sim", "inject", "--name", sim_cluster.name, "--node", "gpu-node-99", "--fault", "xid79")
    assert unknown.returncode == 3
    count = _dsx(
        "sim",
        "inject",
        "--name",
        sim_cluster.name,
        "--node",
        sim_cluster.node_names[0],
        "--fault",
        "not-ready",
        "--count",
        "2",
    )
    assert count.returncode == 2
