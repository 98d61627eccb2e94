"""The sentinel as the integration tests run it: a real `dsx sentinel run` process, its policy, its store.

`SentinelProcess` starts the CLI in a subprocess (so a test can kill -9 it), waits for /readyz,
reads /metrics and the store, and stops it. `restore` takes every sentinel mark off a node of the
shared simulated cluster, so the next test finds it as it was.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from dsx import serialization
from dsx.health.decisions import nodes
from dsx.health.decisions.quarantine import release_change
from dsx.kube.client import KubeClient

SRC = Path(__file__).resolve().parents[3] / "src"
TOKEN = "sentinel-integration-token-0123456789"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def gpu_fault_rule(node_match: str) -> dict[str, Any]:
    """The quarantine rule set these tests act with: a fatal event on a node `node_match` (CEL over
    `node`) selects, which is cordoned and tainted sentinel.dsx.run/quarantined=gpu-fault."""
    return {
        "name": "fatal-gpu-fault",
        "match": {"all": ["event.isFatal", node_match]},
        "taints": [{"key": "sentinel.dsx.run/quarantined", "value": "gpu-fault", "effect": "NoSchedule"}],
    }


def policy_file(folder: Path, document: Mapping[str, Any]) -> Path:
    path = folder / "policy.yaml"
    path.write_text(
        serialization.dump_yaml({"apiVersion": "dsx.health/v1alpha1", "kind": "SentinelPolicy", **document}),
        encoding="utf-8",
    )
    return path


class SentinelProcess:
    def __init__(
        self, folder: Path, policy: Path, store_url: str, *extra: str, env: Mapping[str, str | None] | None = None
    ) -> None:
        self.folder = folder
        self.env = dict(env or {})
        """Changes to the environment it starts with (None removes a variable)."""
        self.port = free_port()
        self.store_url = store_url
        tokens = folder / "tokens"
        tokens.write_text(TOKEN + "\n", encoding="utf-8")
        self.argv = [
            sys.executable, "-m", "dsx", "sentinel", "run", "--config", str(policy), "--store", store_url,
            "--port", str(self.port), "--token-file", str(tokens), "--state-dir", str(folder / "state"),
            "--owner", "integration-sentinel", *extra,
        ]  # fmt: skip
        self.log = folder / "sentinel.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, ready_timeout_seconds: float = 60.0) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
        for name, value in self.env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.argv, env=env, stdout=log, stderr=log)
        self.starts += 1
        wait_for(lambda: self.get("/readyz")[0] == 200 or None, ready_timeout_seconds, "sentinel /readyz", self)

    def get(self, path: str, *, token: bool = False) -> tuple[int, bytes]:
        self.check_alive()
        headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
        request = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError):
            return 0, b""

    def post_events(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + "/v1/events",
            data=json.dumps({"events": events}).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    def metric(self, name: str, labels: str = "") -> float:
        """One sample of /metrics (0 when absent); `labels` as Prometheus prints them, e.g. '{stage="drain"}'."""
        _, text = self.get("/metrics", token=True)
        prefix = f"{name}{labels} "
        for line in text.decode().splitlines():
            if line.startswith(prefix):
                return float(line.split()[-1])
        return 0.0

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() not in (None, -signal.SIGKILL, -signal.SIGTERM, 0):
            raise AssertionError(f"the sentinel exited with {self.process.returncode}: {self.tail()}")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def kill(self) -> None:
        """kill -9: no cleanup, no flush, as a node losing power or an OOM kill."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def wait_for(
    check: Callable[[], T | None], timeout_seconds: float, what: str, sentinel: SentinelProcess | None = None
) -> T:
    """Poll `check` until it returns something other than None/False."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        if sentinel is not None:
            sentinel.check_alive()
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            detail = f"\n--- sentinel log ---\n{sentinel.tail()}" if sentinel is not None else ""
            raise AssertionError(f"timed out after {timeout_seconds:.0f} s waiting for {what}{detail}")
        time.sleep(0.2)


def restore(client: KubeClient, node_name: str, *, not_ready_annotation: str = "sim.dsx.run/not-ready") -> None:
    """Take the sentinel's marks off a shared node and make it schedulable again."""
    node = client.get_node(node_name)
    change = release_change(node)
    patch: dict[str, Any] = {
        "metadata": {
            "labels": {**dict(change.labels), nodes.CERTIFIED_LABEL: None},
            "annotations": {**dict(change.annotations), not_ready_annotation: None},
        },
        "spec": {
            "taints": [t for t in nodes.taints(node) if not str(t.get("key", "")).startswith(nodes.PREFIX)] or None,
            "unschedulable": None,
        },
    }
    client.patch("v1", "Node", node_name, patch)
