"""Area of concern: the circuit breaker's check-and-record is one atomic store operation, so
sentinel replicas sharing a store never admit more quarantines than the limit between them.

Each breaker stands for one sentinel process: its own `CircuitBreaker` (its own thread lock)
on its own store connection. The fleet-size callback is the seam where every admission has
read what it needs to decide; a barrier there makes all of them decide at the same moment,
the interleaving that lost a window entry when load, decide and save were three steps."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dsx.health.decisions.breaker import BreakerState, CircuitBreaker
from dsx.health.decisions.eventstore import EventStore
from dsx.health.decisions.policy import BreakerSettings
from dsx.store import open_store

from .conftest import T0, Backend

FLEET = 10


def _race(stores: list[EventStore], settings: BreakerSettings, names: list[str]) -> list[bool]:
    """Admit one node per breaker, all deciding at once; which were allowed."""
    arrived = threading.Barrier(len(stores), timeout=5)

    def fleet_size() -> int:
        # Decide together; a breaker that takes the decision inside the store transaction
        # cannot get here twice at once, so a broken barrier is a pass-through, not a failure.
        with contextlib.suppress(threading.BrokenBarrierError):
            arrived.wait()
        return FLEET

    breakers = [CircuitBreaker(store, settings, fleet_size) for store in stores]
    with ThreadPoolExecutor(len(stores)) as pool:
        admissions = list(pool.map(lambda pair: pair[0].admit(pair[1], T0), zip(breakers, names, strict=True)))
    return [a.allowed for a in admissions]


@pytest.mark.parametrize(("percent", "racers", "limit"), [(10.0, 2, 1), (30.0, 6, 3)])
def test_racing_replicas_admit_exactly_the_limit(backend: Backend, percent: float, racers: int, limit: int) -> None:
    settings = BreakerSettings(max_quarantined_percent=percent, window_seconds=600)
    stores = [backend.open() for _ in range(racers)]
    allowed = _race(stores, settings, [f"node-{i}" for i in range(racers)])
    assert allowed.count(True) == limit
    document = stores[0].load_breaker("quarantine")
    assert document is not None
    assert len(document["window"]) == limit, "every admitted quarantine is in the window"
    assert document["state"] == BreakerState.TRIPPED.value


def test_racing_replicas_admitting_the_same_node_count_it_once(backend: Backend) -> None:
    settings = BreakerSettings(max_quarantined_percent=20.0, window_seconds=600)
    stores = [backend.open() for _ in range(3)]
    assert _race(stores, settings, ["node-1"] * 3) == [True, True, True]
    document = stores[0].load_breaker("quarantine")
    assert document is not None and [e["node"] for e in document["window"]] == ["node-1"]
    assert CircuitBreaker(stores[1], settings, lambda: FLEET).admit("node-2", T0).allowed
    assert not CircuitBreaker(stores[2], settings, lambda: FLEET).admit("node-3", T0).allowed


# Two sentinel processes, not two connections in one: each admits one node from its own
# interpreter; a file barrier at the fleet-size seam makes them decide at the same moment.
_ADMIT_IN_A_PROCESS = """
import sys, time
from datetime import UTC, datetime
from pathlib import Path
from dsx.health.decisions.breaker import CircuitBreaker
from dsx.health.decisions.policy import BreakerSettings
from dsx.store import open_store

url, folder, me, racers, percent = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])

def fleet_size():
    (folder / f"arrived-{me}").touch()
    deadline = time.monotonic() + 10
    while len(list(folder.glob("arrived-*"))) < racers and time.monotonic() < deadline:
        time.sleep(0.001)
    return 10

store = open_store(url)
breaker = CircuitBreaker(store, BreakerSettings(max_quarantined_percent=percent, window_seconds=600), fleet_size)
print(breaker.admit(f"node-{me}", datetime(2026, 11, 29, 12, 0, tzinfo=UTC)).allowed)
store.close()
"""


@pytest.mark.parametrize("backend_name", ["sqlite", "postgresql"])
def test_two_sentinel_processes_admit_exactly_the_limit(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'events.db'}"
        if backend_name == "sqlite"
        else str(request.getfixturevalue("postgres_url"))
    )
    open_store(url).close()  # the schema exists before the racers open it
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _ADMIT_IN_A_PROCESS, url, str(tmp_path), str(i), "2", "10.0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    answers = [process.communicate(timeout=120) for process in racers]
    assert [p.returncode for p in racers] == [0, 0], [err for _, err in answers]
    assert sorted(out.strip() for out, _ in answers) == ["False", "True"]
    store = open_store(url)
    try:
        document = store.load_breaker("quarantine")
        assert document is not None and len(document["window"]) == 1
    finally:
        store.close()
