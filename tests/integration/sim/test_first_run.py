"""Area of concern: a first `dsx sim up` (issue 12) — a slow binaries step never eats the readiness
budget, and a component that dies while the cluster starts leaves its evidence: the error names it,
says how it ended and quotes its log, and the log is still there afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsx import errors
from dsx.sim import binaries, cluster, processes
from dsx.sim.cluster import Phase, SimCluster
from dsx.sim.nodes import SimOptions

pytestmark = pytest.mark.integration

READY_TIMEOUT_SECONDS = 120.0


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimCluster]:
    instance = SimCluster("first-run", root=tmp_path / "sim")
    yield instance
    instance.down(keep_state=True)


def test_a_binaries_step_slower_than_the_readiness_timeout_still_ends_with_a_running_cluster(
    sim: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binaries step takes (on a fake clock) longer than the whole readiness budget, as a first build does."""
    skew = [0.0]
    real_monotonic = time.monotonic
    real_resolve = binaries.resolve

    def slow_resolve(**kwargs: object) -> binaries.Binaries:
        found = real_resolve(**kwargs)  # type: ignore[arg-type]
        skew[0] += READY_TIMEOUT_SECONDS + 60.0
        return found

    monkeypatch.setattr(cluster.time, "monotonic", lambda: real_monotonic() + skew[0])
    monkeypatch.setattr(cluster.binaries, "resolve", slow_resolve)

    status = sim.up(
        SimOptions(nodes=2, accelerator="h100"), die_with_parent=True, ready_timeout_seconds=READY_TIMEOUT_SECONDS
    )

    assert skew[0] > READY_TIMEOUT_SECONDS
    assert status.phase is Phase.RUNNING
    assert status.nodes_ready == 2


def test_a_component_killed_during_up_is_named_with_its_exit_and_log_tail_and_its_log_survives(
    sim: SimCluster,
) -> None:
    outcome: list[BaseException] = []

    def bring_up() -> None:
        try:
            sim.up(SimOptions(nodes=2, accelerator="h100"), die_with_parent=True)
        except BaseException as exc:
            outcome.append(exc)

    starter = threading.Thread(target=bring_up)
    starter.start()
    apiserver = _wait_for_component(sim, "kube-apiserver")
    os.killpg(apiserver.pid, signal.SIGKILL)
    starter.join(timeout=READY_TIMEOUT_SECONDS)

    assert not starter.is_alive()
    assert len(outcome) == 1, "dsx sim up should fail when kube-apiserver is killed"
    error = outcome[0]
    assert isinstance(error, errors.UnavailableError)
    message = str(error)
    assert "kube-apiserver was killed by SIGKILL" in message
    log = sim.state_dir / "logs" / "kube-apiserver.log"
    assert f"log {log}, last lines: " in message
    assert processes.log_tail(log, lines=1) in message
    assert log.is_file() and log.stat().st_size > 0
    assert all(not alive for _, _, alive in sim.status().components)


def _wait_for_component(sim: SimCluster, component: str) -> processes.ProcessRecord:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        state = sim.load_state()
        for record in state.processes if state else ():
            log = Path(record.log)
            if record.component == component and log.is_file() and log.stat().st_size > 0:
                return record
        time.sleep(0.05)
    raise AssertionError(f"{component} did not start within {READY_TIMEOUT_SECONDS} s")
