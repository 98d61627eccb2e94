"""Area of concern: `dsx demo` end to end — the real lifecycle on a real control plane.

The demo runs against its own `dsx sim` cluster (not the session's), with real gloo collectives
for certification and the real sentinel pipeline for operation. The summary must name the
injected slow node as isolated with a threshold violation, and the Xid node as remediated with
a state history from quarantined to healthy; every artifact must exist, the HTML report must
need no network, and nothing may be left running. A second test interrupts a run the way
Ctrl-C does and checks the same cleanup.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsx.cli.main import main
from dsx.sim import processes
from dsx.sim.cluster import SimCluster

pytestmark = pytest.mark.integration

SLOW_NODE = "gpu-node-05"
XID_NODE = "gpu-node-02"
STATES = ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"]


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


def assert_nothing_left(name: str) -> None:
    cluster = SimCluster(name)
    assert not cluster.state_dir.exists(), f"{cluster.state_dir} was not removed"
    assert processes.strays(f"{cluster.state_dir}/") == []


@pytest.mark.timeout(900)
def test_demo_runs_the_whole_lifecycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo-out"
    summary_file = tmp_path / "summary.json"
    name = "it-demo"
    code = dsx("demo", "--output", str(out), "--name", name, "--summary-json", str(summary_file))
    captured = capsys.readouterr()
    summary = json.loads(summary_file.read_text())
    failed = [f"{s['title']}: {s['status']}: {s['detail']}" for s in summary["steps"] if s["status"] != "passed"]
    assert code == 0, "\n".join(failed) or captured.err[-3000:]
    assert summary["result"] == "passed"

    assert [(e["node"], e["reason"]) for e in summary["isolated"]] == [(SLOW_NODE, "ThresholdViolation")]
    assert re.search(r"GBps measured [0-9.]+, expected >= [0-9.]+", summary["isolated"][0]["message"])

    (remediated,) = summary["remediated"]
    assert remediated["node"] == XID_NODE
    assert remediated["states"][0] == "quarantined" and remediated["states"][-1] == "healthy"
    assert [s for s in remediated["states"] if s in STATES] == STATES  # in this order, none skipped
    assert remediated["finalState"] == "healthy"

    artifacts = {role: Path(path) for role, path in summary["artifacts"].items()}
    for role in (
        "recipe",
        "bundle",
        "bundleAttestation",
        "validationReport",
        "certificationReport",
        "timeline",
        "report",
        "sentinelStatus",
    ):
        assert role in artifacts, role
    missing = [f"{role}: {path}" for role, path in artifacts.items() if not path.exists()]
    assert missing == []

    page = artifacts["report"].read_text(encoding="utf-8")
    assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", page), "the report must not reach the network"
    assert not re.search(r"(?i)<script|<link|@import|src=", page)
    links = set(re.findall(r'href="([^"]+)"', page))
    for path in artifacts.values():
        assert os.path.relpath(path, out) in links

    timeline = json.loads(artifacts["timeline"].read_text())["events"]
    assert any(e["source"] == "sentinel" and e.get("node") == XID_NODE for e in timeline)
    validation = json.loads(artifacts["validationReport"].read_text())
    assert validation["results"]["summary"]["failed"] == 0
    certification = json.loads(artifacts["certificationReport"].read_text())
    assert certification["result"] == "FAILED"  # the slow node fails it; that is what isolation is for

    assert f"isolated:   {SLOW_NODE}" in captured.out
    assert f"remediated: {XID_NODE}  quarantined →" in captured.out
    assert re.search(r"\[\s*\d+\.\d+s\] ok   certify", captured.err)  # progress: one line per step
    assert_nothing_left(name)


@pytest.mark.timeout(300)
def test_an_interrupted_demo_cleans_up(tmp_path: Path) -> None:
    name = "it-demo-int"
    out = tmp_path / "demo-out"
    argv = [sys.executable, "-m", "dsx", "demo", "--output", str(out), "--name", name]
    # A shell without job control starts background jobs with SIGINT ignored, and Python keeps an
    # inherited SIG_IGN; the child must take Ctrl-C as a terminal user's demo would.
    demo = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    try:
        assert demo.stderr is not None
        deadline = time.monotonic() + 180
        for line in demo.stderr:
            seen.append(line)
            if "ok   cluster" in line or time.monotonic() > deadline:
                break
        assert any("ok   cluster" in line for line in seen), "".join(seen)
        demo.send_signal(signal.SIGINT)
        rest = demo.communicate(timeout=120)[1]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 130, "".join(seen) + rest
    assert "dsx: aborted" in rest or "dsx: interrupted" in rest
    assert re.search(r"ok   cleanup +sim down", rest), rest
    summary = json.loads((out / "summary.json").read_text())
    assert summary["result"] == "failed" and summary["interrupted"] is True
    assert_nothing_left(name)
