"""Area of concern: two `dsx sentinel run` processes acting on one store without leader election
would split its events between them (issue 31: a node left cordoned while the store said
healthy). The second refuses at start with an error naming the first and exits 6; a sentinel
killed with -9 does not block the one restarted in its place; a stopped one frees the store at
once; an observe-only sentinel beside an acting one is not refused."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import actor
from dsx.store import open_store

from .harness import SentinelProcess, gpu_fault_rule, policy_file, wait_for

pytestmark = pytest.mark.integration

ACTING = {
    "stages": {"quarantine": {"enabled": True}},
    "breaker": {"maxQuarantinedPercent": 50},
    # acting, yet touching no node of the shared sim: no rule matches one, and the kernel logs are
    # read from their end (earlier tests' Xid lines are not faults for these sentinels)
    "quarantine": {"ruleSets": [gpu_fault_rule("node.metadata.name == 'no-such-node'")]},
    "monitors": {"startAtEnd": True},
}


def holder(store_url: str) -> str:
    store = open_store(store_url)
    try:
        document = store.load_breaker(actor.DOCUMENT) or {}
    finally:
        store.close()
    return str(document.get("instance") or "")


def exit_of(sentinel: SentinelProcess, timeout_seconds: float = 60) -> int:
    """Start a sentinel expected to exit by itself; its exit code."""
    assert sentinel.process is None
    with contextlib.suppress(AssertionError):  # it exited: check_alive raised
        sentinel.start(ready_timeout_seconds=timeout_seconds)
    assert sentinel.process is not None
    return sentinel.process.wait(timeout_seconds)


def test_a_second_acting_sentinel_on_the_store_refuses(sim_cluster: Any, tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    policy = policy_file(tmp_path, ACTING)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = SentinelProcess(tmp_path / "a", policy, store_url, "--sim", sim_cluster.name)
    second = SentinelProcess(tmp_path / "b", policy, store_url, "--sim", sim_cluster.name)
    try:
        first.start()
        assert first.process is not None and holder(store_url).endswith(f"-{first.process.pid}")
        began = time.monotonic()
        assert exit_of(second) == 6
        assert time.monotonic() - began < 60
        said = second.tail()
        assert '"message": "event store: another sentinel acts on it: ' in said, said  # the JSON log's error record
        assert '"exit_code": 6' in said
        assert f"-{first.process.pid} (no leader election)" in said and "--leader-elect" in said
        first.check_alive()  # the first goes on acting
        assert holder(store_url).endswith(f"-{first.process.pid}")

        first.kill()  # kill -9: the claim stays, renewed seconds ago, by a process that is gone
        restarted = SentinelProcess(tmp_path / "b", policy, store_url, "--sim", sim_cluster.name)
        began = time.monotonic()
        restarted.start()
        assert time.monotonic() - began < actor.STALE_SECONDS  # did not wait the claim out
        assert restarted.process is not None and holder(store_url).endswith(f"-{restarted.process.pid}")
        restarted.stop()  # SIGTERM: a clean stop releases the claim
        assert holder(store_url) == ""
    finally:
        for sentinel in (first, second):
            sentinel.stop()


def test_an_observing_sentinel_may_share_the_store(sim_cluster: Any, tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    acting = SentinelProcess(tmp_path / "a", policy_file(tmp_path / "a", ACTING), store_url, "--sim", sim_cluster.name)
    observing = policy_file(tmp_path / "b", {"monitors": {"startAtEnd": True}})
    watching = SentinelProcess(tmp_path / "b", observing, store_url, "--sim", sim_cluster.name)
    try:
        acting.start()
        watching.start()
        wait_for(lambda: watching.get("/readyz")[0] == 200 or None, 30, "the observer ready", watching)
        acting.check_alive()
        watching.check_alive()
    finally:
        for sentinel in (acting, watching):
            sentinel.stop()
