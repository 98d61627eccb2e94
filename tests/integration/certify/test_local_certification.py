"""Area of concern: `dsx certify run --executor local` runs real gloo collectives across simulated
nodes and blames exactly the injected node with the right reason, and nobody else.

Each case is one CLI run (about half a minute on 2 cores); outcomes are deterministic because
the injected faults sit far outside CPU noise (slow = 1/10 of the link rate against a
threshold of 35% of a calibrated reference; hang = silence past the stall timeout).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _certify(tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    html = tmp_path / "report.html"
    command = [
        sys.executable, "-m", "dsx", "certify", "run", "--executor", "local", "--nodes", "8",
        "--categories", "nccl-all-reduce", "--output", str(report), "--html", str(html), *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, env=_env())
    assert report.exists(), done.stderr
    return done.returncode, json.loads(report.read_text()), html.read_text()


def _env() -> dict[str, str]:
    import os

    return dict(os.environ, OMP_NUM_THREADS="1")


def _failed(report: dict) -> dict[str, dict]:
    return {n["name"]: n for n in report["nodeResults"] if n["status"] == "FAILED"}


def test_healthy_cluster_passes_with_real_collectives(tmp_path: Path) -> None:
    code, report, html = _certify(tmp_path)
    assert code == 0, report
    assert report["result"] == "PASSED"
    group = report["categories"][0]["groups"][0]
    assert group["nodes"] == [f"node-{i}" for i in range(8)]
    assert group["metrics"]["busBandwidthGbps"] > 0
    assert len(group["sizes"]) >= 3
    assert "<svg" in html and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("slow", "ThresholdViolation"), ("crash", "WorkloadFailed"), ("hang", "Timeout"), ("corrupt", "WrongResults")],
)
def test_an_injected_fault_blames_exactly_that_node(tmp_path: Path, kind: str, reason: str) -> None:
    code, report, _ = _certify(tmp_path, "--inject", f"node-5:{kind}")
    assert code == 1
    failed = _failed(report)
    assert sorted(failed) == ["node-5"], failed
    assert failed["node-5"]["reason"] == reason
    if kind == "slow":
        assert failed["node-5"]["measured"] < failed["node-5"]["expected"]
    if kind == "crash":
        assert failed["node-5"]["exitCode"] == 134
    assert report["categories"][0]["isolation"]["confirmedFaulty"] == ["node-5"]


def test_two_injected_nodes_are_both_found(tmp_path: Path) -> None:
    code, report, _ = _certify(tmp_path, "--inject", "node-2:corrupt", "--inject", "node-6:crash")
    assert code == 1
    failed = _failed(report)
    assert sorted(failed) == ["node-2", "node-6"], failed
    assert failed["node-2"]["reason"] == "WrongResults"
    assert failed["node-6"]["reason"] == "WorkloadFailed"
