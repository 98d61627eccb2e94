"""Area of concern: nodes flooding their kernel logs with 80 KB crafted lines do not delay the
fault on another node — the real `dsx sentinel run` process on the shared `dsx sim` cluster, one
thread serving every log, cordons node B within seconds of its Xid 79 while five other nodes'
logs hold a backlog of 64 MB each and keep growing. (Reading 1000 lines per poll, as before the
per-poll byte bound, one round over the five took over 10 s.) The same process answers a
deeply nested body with 400 and writes nothing but JSON records to its log."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import nodes
from dsx.kube.client import KubeClient
from dsx.sim import faults

from .harness import TOKEN, SentinelProcess, policy_file, restore, wait_for

pytestmark = pytest.mark.integration

CORDON_WITHIN_SECONDS = 6.0
"""Generous for a loaded 2-core machine (about 1.5 s measured); bench/bench_sentinel.py measures the latency."""
BACKLOG_LINES = 1000
"""Per flooding node: 64 MB, what one poll used to read (1000 lines of at most 64 KiB)."""
GARBAGE = ("NVRM: Xid (" * 5957 + "\n").encode()
"""A 64 KiB line (one piece: longer lines are cut there) built against the parser (repeated markers)."""


@pytest.fixture
def nodes_and_logs(sim_cluster: Any, kube_client: KubeClient) -> Iterator[tuple[list[Path], str]]:
    """(the kernel logs of five flooding nodes, the faulty node); logs emptied, nodes restored after."""
    faulty = sim_cluster.node_names[1]
    flooding = [sim_cluster.kernel_log(name) for name in sim_cluster.node_names if name != faulty]
    try:
        yield flooding, faulty
    finally:
        for path in flooding:
            path.write_bytes(b"")  # the cluster is shared: no later test reads 40 MB of garbage
        for name in sim_cluster.node_names:
            restore(kube_client, name)


def flood(paths: list[Path], stop: threading.Event) -> int:
    """A backlog of BACKLOG_LINES 80 KB garbage lines in each log, then more until `stop`; lines written."""
    written = 0
    for path in paths:
        with path.open("ab") as log:
            log.write(GARBAGE * BACKLOG_LINES)
        written += BACKLOG_LINES
    while not stop.is_set():
        for path in paths:
            with path.open("ab") as log:
                log.write(GARBAGE * 2)
            written += 2
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


def test_flooded_kernel_logs_do_not_delay_another_nodes_fault(
    sim_cluster: Any, kube_client: KubeClient, nodes_and_logs: tuple[list[Path], str], tmp_path: Path
) -> None:
    flooding, faulty = nodes_and_logs
    policy = policy_file(
        tmp_path,
        {
            "stages": {"quarantine": {"enabled": True}},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {
                "ruleSets": [
                    {
                        "name": "fatal-gpu-fault",
                        "match": {"all": ["event.isFatal", f"node.metadata.name == '{faulty}'"]},
                    }
                ]
            },
            "monitors": {"startAtEnd": True},
        },
    )
    sentinel = SentinelProcess(tmp_path, policy, f"sqlite:///{tmp_path / 'events.db'}", "--sim", sim_cluster.name)
    sentinel.start()
    stop = threading.Event()
    written: list[int] = []
    time.sleep(1.0)  # the monitors placed themselves at the end of each log (start_at_end)
    flooder = threading.Thread(target=lambda: written.append(flood(flooding, stop)))
    flooder.start()
    try:
        time.sleep(2.0)  # the flood is on: every flooding log has a backlog
        began = time.monotonic()
        faults.inject(sim_cluster.cluster, faulty, "xid79")  # what `dsx sim inject` does, without its start-up
        wait_for(
            lambda: nodes.unschedulable(kube_client.get_node(faulty)),
            CORDON_WITHIN_SECONDS,
            f"{faulty} cordoned while {len(flooding)} nodes flood their logs",
            sentinel,
        )
        seconds = time.monotonic() - began
        print(f"fault on {faulty} cordoned {seconds:.2f} s after injection, {len(flooding)} nodes flooding")

        # the same process: a deeply nested body is a 400 naming the depth, and it still serves
        status, answer = post(sentinel, b"[" * 100_000 + b"]" * 100_000)
        assert status == 400 and "nested too deeply" in answer["error"]["message"]
        assert sentinel.get("/healthz")[0] == 200
    finally:
        stop.set()
        flooder.join()
        sentinel.stop()
    assert written and written[0] >= len(flooding) * BACKLOG_LINES
    records = [json.loads(line) for line in sentinel.log.read_text().splitlines() if line.strip()]
    assert any(record["message"] == "serving" and record["port"] == sentinel.port for record in records)
