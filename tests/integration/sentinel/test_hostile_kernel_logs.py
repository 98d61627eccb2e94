"""Area of concern: one node flooding its kernel log with 80 KB crafted lines does not delay the
fault on another node — the real `dsx sentinel run` process on the shared `dsx sim` cluster, one
thread serving both logs, cordons node B within seconds of its Xid 79 while node A's log keeps
growing. The same process answers a deeply nested body with 400 and writes nothing but JSON
records to its log."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx.health import nodes
from dsx.kube.client import KubeClient

from .harness import TOKEN, SentinelProcess, policy_file, restore, wait_for

pytestmark = pytest.mark.integration

CORDON_WITHIN_SECONDS = 10.0
"""Generous for a loaded 2-core machine; bench/bench_sentinel.py measures the latency itself."""
GARBAGE = ("NVRM: Xid (" * 7300 + "\n").encode()
"""An 80 KB line built against the parser (repeated markers: its slowest crafted line)."""


@pytest.fixture
def two_nodes(sim_cluster: Any, kube_client: KubeClient) -> Iterator[tuple[str, str]]:
    flooding, faulty = sim_cluster.node_names[0], sim_cluster.node_names[1]
    try:
        yield flooding, faulty
    finally:
        for name in (flooding, faulty):
            restore(kube_client, name)


def flood(path: Path, stop: threading.Event) -> int:
    """Append 80 KB garbage lines until `stop`; lines written."""
    written = 0
    with path.open("ab") as log:
        while not stop.is_set():
            log.write(GARBAGE * 5)
            log.flush()
            written += 5
            stop.wait(0.1)
    return written


def post(sentinel: SentinelProcess, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        sentinel.url + "/v1/events",
        data=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_flooded_kernel_log_does_not_delay_another_nodes_fault(
    sim_cluster: Any, kube_client: KubeClient, two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    flooding, faulty = two_nodes
    policy = policy_file(
        tmp_path,
        {
            "stages": {"quarantine": {"enabled": True}},
            "breaker": {"max_quarantined_percent": 50},
            "quarantine": {
                "rule_sets": [
                    {
                        "name": "fatal-gpu-fault",
                        "match": {"all": ["event.is_fatal", f"node.metadata.name == '{faulty}'"]},
                    }
                ]
            },
            "monitors": {"start_at_end": True},
        },
    )
    sentinel = SentinelProcess(tmp_path, policy, f"sqlite:///{tmp_path / 'events.db'}", "--sim", sim_cluster.name)
    sentinel.start()
    stop = threading.Event()
    written: list[int] = []
    flooder = threading.Thread(target=lambda: written.append(flood(sim_cluster.kernel_log(flooding), stop)))
    flooder.start()
    try:
        time.sleep(2.0)  # the flood is on: node A's log always has more waiting
        began = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "dsx", "sim", "inject", "--name", sim_cluster.name, "--node", faulty,
             "--fault", "xid79"],
            check=True,
            capture_output=True,
        )  # fmt: skip
        wait_for(
            lambda: nodes.unschedulable(kube_client.get_node(faulty)),
            CORDON_WITHIN_SECONDS,
            f"{faulty} cordoned while {flooding} floods its log",
            sentinel,
        )
        seconds = time.monotonic() - began
        print(f"fault on {faulty} cordoned {seconds:.2f} s after injection, {flooding} flooding")
        assert not nodes.unschedulable(kube_client.get_node(flooding))

        # the same process: a deeply nested body is a 400 naming the depth, and it still serves
        status, answer = post(sentinel, b"[" * 100_000 + b"]" * 100_000)
        assert status == 400 and "nested too deeply" in answer["error"]["message"]
        assert sentinel.get("/healthz")[0] == 200
    finally:
        stop.set()
        flooder.join()
        sentinel.stop()
    assert written and written[0] >= 50
    records = [json.loads(line) for line in sentinel.log.read_text().splitlines() if line.strip()]
    assert any(record["message"] == "serving" and record["port"] == sentinel.port for record in records)
