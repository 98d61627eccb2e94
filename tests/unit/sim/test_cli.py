"""Area of concern: `dsx sim` refuses bad input with one line and exit 2, and answers about
absent clusters without starting anything."""

from __future__ import annotations

import json

import pytest

from dsx.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["sim", *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_dry_run_up_lists_the_nodes_it_would_create(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "up", "--nodes", "3", "--accelerator", "gb200", "--cliques", "2", "--dry-run")
    assert code == 0
    assert out.splitlines()[:3] == [
        "would create gpu-node-00 rack=0 block=0 clique=0",
        "would create gpu-node-01 rack=0 block=0 clique=0",
        "would create gpu-node-02 rack=1 block=0 clique=1",
    ]


def test_cliques_on_hgx_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "up", "--accelerator", "h100", "--cliques", "2", "--dry-run")
    assert code == 2
    assert (
        err.strip()
        == "dsx: error: dsx sim: cliques: h100 has no multi-node NVLink domain; --cliques applies to gb200 only"
    )


def test_bad_choice_and_bad_name_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "up", "--accelerator", "v100", "--dry-run")[0] == 2
    code, _, err = _run(capsys, "status", "--name", "Bad_Name")
    assert code == 2
    assert "name: 'Bad_Name' is not allowed" in err


def test_absent_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "status", "--name", "nothing-here", "--format", "json")
    assert code == 0
    assert json.loads(out)["phase"] == "absent"
    code, _, err = _run(capsys, "kubeconfig", "--name", "nothing-here")
    assert code == 3
    assert "no simulated cluster named 'nothing-here'" in err
    code, _, err = _run(capsys, "down", "--name", "nothing-here")
    assert code == 0
    assert "no running control plane" in err
    code, _, err = _run(capsys, "inject", "--name", "nothing-here", "--node", "gpu-node-00", "--fault", "xid79")
    assert code == 3


def test_status_table_says_when_readiness_is_unknown() -> None:
    from dsx.cli import sim_cmd

    degraded = {
        "name": "c1",
        "phase": "degraded",
        "kubeconfig": "/state/sim/c1/kubeconfig",
        "options": {"nodes": 4},
        "components": [{"name": "kube-apiserver", "pid": 42, "alive": False}],
        "nodes": {"total": 4, "ready": None, "names": []},
    }
    head = sim_cmd._status_table(degraded).splitlines()[0]
    assert head == (
        "cluster c1: degraded, 4 nodes (readiness unknown: the apiserver does not answer), "
        "kubeconfig /state/sim/c1/kubeconfig"
    )
    running = {**degraded, "phase": "running", "nodes": {"total": 4, "ready": 3, "names": []}}
    assert sim_cmd._status_table(running).startswith("cluster c1: running, 3/4 nodes Ready,")


def test_list_names_every_cluster_with_state_and_says_so_when_there_is_none(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from dsx.sim import cluster, nodes

    monkeypatch.setenv("DSX_STATE_DIR", str(tmp_path))
    code, out, _ = _run(capsys, "list")
    assert (code, out) == (0, "no simulated clusters; start one with `dsx sim up`\n")

    for name in ("beta", "alpha"):  # recorded but stopped (`down --keep-state`): no process, no apiserver call
        state = cluster.ClusterState(
            name, nodes.SimOptions(2, "h200", None, None, "eks", "ubuntu").resolved(), "v1.36.3",
            {"kube-apiserver": 1}, (), {}, "2026-12-01T10:00:00Z",
        )  # fmt: skip
        cluster.SimCluster(name)._save(state)
    (tmp_path / "sim" / "not-a-cluster").mkdir()
    code, out, _ = _run(capsys, "list", "--format", "json")
    listed = json.loads(out)["clusters"]
    assert code == 0
    assert [(c["name"], c["phase"], c["options"]["accelerator"], c["nodes"]["total"]) for c in listed] == [
        ("alpha", "stopped", "h200", 2),
        ("beta", "stopped", "h200", 2),
    ]
    code, out, _ = _run(capsys, "list")
    assert out.splitlines()[0].split() == ["name", "phase", "ready", "nodes", "accelerator", "kubeconfig"]
    assert out.splitlines()[2].split()[:4] == ["alpha", "stopped", "?/2", "h200"]
