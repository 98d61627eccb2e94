"""Area of concern: `--log-format json|text` of the long-running commands (issue 16, item 6) — in
JSON mode every stderr line is one JSON object (no plain-text banner), text mode is for a
terminal, and the one setup (`dsx.logs.configure`) replaces its handler rather than adding one."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dsx import logs

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DSX_API_TOKENS": "log-format-token-0123456789"}
XID = "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"


def _monitor(tmp_path: Path, log_format: str) -> list[str]:
    kern_log = tmp_path / "kern.log"
    kern_log.write_text(XID)
    argv = ["sentinel", "monitor", "kernel-log", "--node", "n1", "--path", str(kern_log), "--once"]
    argv += ["--state", str(tmp_path / f"cursor-{log_format}.json"), "--store", f"sqlite:///{tmp_path / 'e.db'}"]
    done = subprocess.run(
        [sys.executable, "-m", "dsx", *argv, "--log-format", log_format],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()


def test_monitor_logs_json_lines_only(tmp_path: Path) -> None:
    lines = _monitor(tmp_path, "json")
    records = [json.loads(line) for line in lines]  # a plain-text line fails here
    assert records[-1]["message"] == "kernel-log: 1 new event(s) sent" and records[-1]["events_sent"] == 1


def test_monitor_logs_text_for_a_terminal(tmp_path: Path) -> None:
    lines = _monitor(tmp_path, "text")
    assert lines[-1].endswith("INFO dsx.sentinel.monitor: kernel-log: 1 new event(s) sent")


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_serve_announces_itself_in_the_chosen_format(log_format: str, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "dsx", "serve", "--port", str(port), "--log-format", log_format]
    server = subprocess.Popen(argv, env=ENV, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    lines = err.strip().splitlines()
    assert lines, "dsx serve logged nothing"
    if log_format == "json":
        first = json.loads(lines[0])
        assert first["logger"] == "dsx.api" and first["url"] == f"http://127.0.0.1:{port}"
        assert all(json.loads(line) for line in lines)
    else:
        assert f"INFO dsx.api: serving on http://127.0.0.1:{port}" in lines[0]


UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_sentinel_run_that_cannot_start_says_why_in_the_chosen_format(log_format: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    argv = ["sentinel", "run", "--kubeconfig", str(kubeconfig), "--store", "memory:", "--port", "0"]
    argv += ["--state-dir", str(tmp_path / "state"), "--log-format", log_format]
    env = {**ENV, "DSX_SENTINEL_TOKENS": "sentinel-token-0123456789"}
    done = subprocess.run(
        [sys.executable, "-m", "dsx", *argv], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 6, done.stderr
    lines = done.stderr.strip().splitlines()
    if log_format == "json":
        last = [json.loads(line) for line in lines][-1]  # every line is JSON, the fatal one included
        assert last["logger"] == "dsx.cli" and last["level"] == "error"
        assert last["error_code"] == "UNAVAILABLE" and "cannot reach the Kubernetes API" in last["message"]
    else:
        assert lines[-1].startswith("dsx: error: list nodes: cannot reach the Kubernetes API")


def test_configure_again_switches_the_format_without_a_second_handler() -> None:
    root = logging.getLogger("dsx")
    saved = (list(root.handlers), root.level, root.propagate)
    try:
        logs.configure("json")
        logs.configure(logs.LogFormat.TEXT)
        ours = [h for h in root.handlers if h not in saved[0]]
        assert len(ours) == 1 and not isinstance(ours[0].formatter, logs.JsonFormatter)
        with pytest.raises(ValueError):
            logs.configure("yaml")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]
