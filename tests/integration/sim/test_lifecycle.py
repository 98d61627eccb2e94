"""Area of concern: the `dsx sim` command line end to end on a cluster of its own — 8 Ready GPU
nodes as kubectl sees them, idempotent `up`, restart after a crashed component, and a `down`
that leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsx.sim import processes

pytestmark = pytest.mark.integration

NAME = "lifecycle"


def _dsx(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsx", "sim", *args, "--name", NAME],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _status() -> dict:
    done = _dsx("status", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_up_kubectl_restart_down(tmp_path: Path) -> None:
    state_dir = Path(os.environ["DSX_STATE_DIR"]) / "sim" / NAME
    try:
        up = _dsx("up", "--nodes", "8", "--accelerator", "h100")
        assert up.returncode == 0, up.stderr
        kubeconfig = state_dir / "kubeconfig"
        assert up.stdout == f"export KUBECONFIG={kubeconfig}\n"
        assert _dsx("kubeconfig").stdout.strip() == str(kubeconfig)

        state = json.loads((state_dir / "state.json").read_text())
        kubectl = state["binaries"]["kubectl"]
        listed = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        items = json.loads(listed.stdout)["items"]
        assert len(items) == 8
        for node in items:
            conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
            assert conditions["Ready"] == "True"
            assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
            assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        table = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "get", "nodes"], capture_output=True, text=True, check=True
        ).stdout
        assert table.count(" Ready ") == 8

        pids = [c["pid"] for c in _status()["components"]]
        again = _dsx("up", "--nodes", "8", "--accelerator", "h100")
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr
        assert [c["pid"] for c in _status()["components"]] == pids

        # other options on a running cluster converge its nodes: surplus removed, changed replaced
        changed = _dsx("up", "--nodes", "6", "--accelerator", "h200")
        assert changed.returncode == 0, changed.stderr
        assert "6 replaced, 2 removed" in changed.stderr
        relisted = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        products = {n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in json.loads(relisted.stdout)["items"]}
        assert products == {"NVIDIA-H200"}
        assert _status()["nodes"]["total"] == 6

        # a crashed apiserver: status says degraded, `up` restarts the control plane on its data
        apiserver = next(c for c in _status()["components"] if c["name"] == "kube-apiserver")
        os.kill(apiserver["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _status()["phase"] != "degraded" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _status()["phase"] == "degraded"
        resumed = _dsx("up", "--nodes", "6", "--accelerator", "h200")
        assert resumed.returncode == 0, resumed.stderr
        assert "restarting" in resumed.stderr
        after = _status()
        assert after["phase"] == "running"
        assert after["nodes"]["ready"] == 6

        down = _dsx("down")
        assert down.returncode == 0, down.stderr
        assert processes.strays(f"{state_dir}/") == []
        for component in after["components"]:
            assert not Path(f"/proc/{component['pid']}").exists() or _zombie(component["pid"])
        assert not state_dir.exists()
        assert _status()["phase"] == "absent"
        assert _dsx("down").returncode == 0
        assert _dsx("kubeconfig").returncode == 3
    finally:
        _dsx("down")


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"
