"""Area of concern: `dsx certify run --executor local --nodes 8` runs real gloo collectives across
simulated nodes and blames exactly the injected node with the right reason, and nobody else.

Each case is one CLI run in its own process, as a user runs it. Outcomes do not depend on how
busy the machine is: a slow node's link is capped at 1/5 of the same calibrated reference the
judge holds it to (floor 1/4), a hang is silence past the stall timeout where every working
rank reports each operation, and healthy runs only have to reach 1/4 of the worse of two
calibration runs. The cases share one calibration file, so the references for 8, 4 and 2
ranks are measured once for the module instead of once per case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

HANG_STALL_SECONDS = "5"
"""Every rank marks each collective it finishes, so 5 s without a mark is a hang even on a busy box."""


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("calibration") / "calibration.json"


def _certify(tmp_path: Path, calibration: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    html = tmp_path / "report.html"
    command = [
        sys.executable, "-m", "dsx", "certify", "run", "--executor", "local", "--nodes", "8",
        "--categories", "nccl-all-reduce", "--calibration", str(calibration),
        "--output", str(report), "--html", str(html), *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, env=dict(os.environ))
    assert report.exists(), done.stderr
    assert html.exists(), done.stderr
    return done.returncode, json.loads(report.read_text()), html.read_text()


def _failed(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in report["nodeResults"] if n["status"] == "FAILED"}


def test_healthy_cluster_passes_with_real_collectives(tmp_path: Path, calibration: Path) -> None:
    code, report, html = _certify(tmp_path, calibration, "--junit", str(tmp_path / "report.xml"))
    assert code == 0, report
    assert report["result"] == "PASSED"
    assert report["failedNodes"] == []
    group = report["categories"][0]["groups"][0]
    assert group["nodes"] == [f"node-{i}" for i in range(8)]
    assert group["metrics"]["busBandwidthGBps"] > 0
    assert [p["sizeBytes"] for p in group["sizes"]] == [256 * 1024, 1024 * 1024, 4 * 1024 * 1024]
    assert "<svg" in html
    suite = ElementTree.parse(tmp_path / "report.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("tests") == "9"
    assert json.loads(calibration.read_text())["kind"] == "CertificationCalibration"


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("slow", "ThresholdViolation"), ("crash", "WorkloadFailed"), ("hang", "Timeout"), ("corrupt", "WrongResults")],
)
def test_an_injected_fault_blames_exactly_that_node(tmp_path: Path, calibration: Path, kind: str, reason: str) -> None:
    stall = ["--stall-timeout-seconds", HANG_STALL_SECONDS] if kind == "hang" else []
    code, report, html = _certify(tmp_path, calibration, "--inject", f"node-5:{kind}", *stall)
    assert code == 1
    assert report["result"] == "FAILED"
    failed = _failed(report)
    assert sorted(failed) == ["node-5"], failed
    assert report["failedNodes"] == ["node-5"]
    node = failed["node-5"]
    assert node["reason"] == reason
    if kind == "slow":
        assert node["metric"] == "busBandwidthGBps"
        assert 0 < node["measured"] < node["expected"]
        assert "measured" in node["message"] and "expected" in node["message"]
    if kind == "crash":
        assert node["exitCode"] == 134
    if kind == "hang":
        assert "hang" in node["message"]
    if kind == "corrupt":
        assert "wrong element" in node["message"] and node["evidence"]
    isolation = report["categories"][0]["isolation"]
    assert isolation["confirmedFaulty"] == ["node-5"]
    assert isolation["runs"] <= isolation["bound"]
    assert "node-5 <span" in html and reason in html


def test_two_injected_nodes_are_both_found(tmp_path: Path, calibration: Path) -> None:
    code, report, _ = _certify(tmp_path, calibration, "--inject", "node-2:corrupt", "--inject", "node-6:crash")
    assert code == 1
    failed = _failed(report)
    assert sorted(failed) == ["node-2", "node-6"], failed
    assert failed["node-2"]["reason"] == "WrongResults"
    assert failed["node-6"]["reason"] == "WorkloadFailed"
    passed = [n["name"] for n in report["nodeResults"] if n["status"] == "PASSED"]
    assert passed == [f"node-{i}" for i in (0, 1, 3, 4, 5, 7)]
