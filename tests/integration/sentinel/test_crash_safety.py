"""Area of concern: kill -9 the sentinel in the middle of a burst, restart it, and nothing is lost or
done twice — with SQLite and with PostgreSQL.

A burst of Xid lines lands in the kernel logs of 24 nodes (three per node, some written while the
sentinel is down); the sentinel follows the logs, quarantines, drains (evicting real pods) and
remediates through a script provider that keeps a ledger. It is killed with SIGKILL three times
at seeded random moments right after a chunk of lines, and restarted. At the end: every line is
exactly one stored event, every node went through each state exactly once, one quarantine and
one remediation decision per node (one request id, counted once), every pod evicted."""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import nodes
from dsx.kube.client import KubeClient
from dsx.model.health import NODE_REMEDIATED_CHECK, NodeState
from dsx.store import open_store

from .harness import SentinelProcess, policy_file, wait_for

pytestmark = pytest.mark.integration

NODES = 24
LINES_PER_NODE = 3
CHUNK = 6
KILL_AFTER_CHUNKS = (3, 6, 9)
DOWN_CHUNKS = (7,)
"""Written while the sentinel is dead: the restarted monitor must find them."""
LEDGER_SCRIPT = """\
import sys
with open(sys.argv[1], "a", encoding="utf-8") as ledger:
    ledger.write(f"{sys.argv[2]} {sys.argv[3]}\\n")
print("power cycle requested")
"""


def xid_line(node_index: int, line: int) -> str:
    pci = f"0000:{0x18 + line:02x}:00"
    return f"[{1000 + node_index * 10 + line}.000000] NVRM: Xid (PCI:{pci}): 79, pid=0, GPU has fallen off the bus."


@pytest.fixture
def fleet(kube_client: KubeClient, sim_namespace: str) -> Iterator[tuple[str, list[str]]]:
    label = f"crash-{uuid.uuid4().hex[:6]}"
    names = [f"{label}-{i:02d}" for i in range(NODES)]
    for name in names:
        kube_client.create(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"dsx-test/fleet": label}}}
        )
    for name in names[::3]:
        kube_client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"work-{name}", "namespace": sim_namespace},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "trainer:1"}]},
            }
        )
    try:
        yield label, names
    finally:
        for name in names:
            kube_client.delete("v1", "Node", name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'events.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_kill_9_mid_burst_loses_nothing_and_does_nothing_twice(
    sim_cluster: Any,
    kube_client: KubeClient,
    sim_namespace: str,
    fleet: tuple[str, list[str]],
    store_url: str,
    tmp_path: Path,
) -> None:
    label, names = fleet
    logs = {name: tmp_path / "logs" / f"{name}.log" for name in names}
    for path in logs.values():
        path.parent.mkdir(exist_ok=True)
        path.touch()
    ledger, script = tmp_path / "ledger.txt", tmp_path / "bmc.py"
    script.write_text(LEDGER_SCRIPT)
    policy = policy_file(
        tmp_path,
        {
            "stages": {s: {"enabled": True} for s in ("quarantine", "drain", "remediation")},
            "gpuNodeSelector": {"dsx-test/fleet": label},
            "breaker": {"enabled": False},
            "drain": {"pollSeconds": 0.3, "gracePeriodSeconds": 0},
            "remediation": {
                "provider": {
                    "kind": "script",
                    "command": [sys.executable, str(script), str(ledger), "{node}", "{request_id}"],
                }
            },
            "monitors": {
                "kubeObjects": False,
                "pollIntervalSeconds": 0.05,
                "kernelLogs": [{"node": n, "path": str(p)} for n, p in logs.items()],
            },
        },
    )
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--kubeconfig", str(sim_cluster.kubeconfig))
    lines = [(names[i % NODES], xid_line(i % NODES, i // NODES)) for i in range(NODES * LINES_PER_NODE)]
    chunks = [lines[i : i + CHUNK] for i in range(0, len(lines), CHUNK)]
    pick = random.Random(20261129)
    sentinel.start()
    try:
        for number, chunk in enumerate(chunks, start=1):
            for node, line in chunk:
                with logs[node].open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
            if number in KILL_AFTER_CHUNKS:
                time.sleep(pick.uniform(0.0, 0.3))
                sentinel.kill()
            if sentinel.process is not None and sentinel.process.poll() is not None and number + 1 not in DOWN_CHUNKS:
                sentinel.start()
            time.sleep(0.1)
        if sentinel.process is not None and sentinel.process.poll() is not None:
            sentinel.start()
        assert sentinel.starts == 1 + len(KILL_AFTER_CHUNKS)

        store = open_store(store_url)
        try:
            stages = ("quarantine", "drain", "remediation")

            def settled() -> bool:
                last = store.last_sequence()
                done = all(store.cursor(s) == last for s in stages)
                return done and all(store.node_state(n).state is NodeState.RECERTIFYING for n in names)

            wait_for(settled, 120, "every node remediated and every stage caught up", sentinel)

            stored = [s.event for s in store.events(limit=10_000)]
            kernel = [e for e in stored if e.check_name == "KernelLogXid"]
            assert sorted(e.message for e in kernel) == sorted(line for _, line in lines)  # none lost, none doubled
            for name in names:
                moves = [m.to_state.value for m in store.node_history(name)]
                assert moves == ["quarantined", "draining", "drained", "remediating", "recertifying"], (name, moves)
                node = kube_client.get_node(name)
                assert nodes.unschedulable(node) and nodes.has_taint(node, "sentinel.dsx.run/quarantined")
            quarantined = Counter(
                r.detail["node"]
                for s in store.events(limit=10_000)
                for r in store.stage_records(s.sequence)
                if r.stage == "quarantine" and r.detail.get("disposition") == "quarantined"
            )
            assert quarantined == Counter(dict.fromkeys(names, 1))
            requests: dict[str, set[str]] = {}
            for row in ledger.read_text().splitlines():
                node, request_id = row.split()
                requests.setdefault(node, set()).add(request_id)
            assert {n: len(ids) for n, ids in requests.items()} == dict.fromkeys(names, 1)
            remediated = Counter(e.node_name for e in stored if e.check_name == NODE_REMEDIATED_CHECK)
            assert remediated == Counter(dict.fromkeys(names, 1))
            assert all(store.count_remediations(n, stored[0].generated_at.replace(year=2000)) == 1 for n in names)
            assert kube_client.list_pods(sim_namespace) == []
        finally:
            store.close()
    finally:
        sentinel.stop()
