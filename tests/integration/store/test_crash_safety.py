"""Area of concern: kill -9 in the middle of a burst, restart, and nothing is lost or done twice —
with SQLite and with PostgreSQL. A kernel-log monitor process ingests a log that keeps growing
(and rotates), a consumer process performs one effect per event; both are killed with SIGKILL
at random points and restarted. At the end every log line is exactly one stored event and
every event has exactly one effect."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsx.health.decisions.eventstore import EventStore, StageStatus
from dsx.store import open_store

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("crash_worker.py")
SRC = Path(__file__).resolve().parents[3] / "src"
LINES = 1200
CHUNK = 60
KILLS = 8
CATCH_UP_SECONDS = 60.0


def xid_line(index: int) -> str:
    """A distinct GPU per line, so the burst deduplicator keeps every one."""
    pci = f"{index // 256:04x}:{index % 256:02x}:00"
    return f"[{index}.000000] NVRM: Xid (PCI:{pci}): 79, pid=0, GPU has fallen off the bus."


class Worker:
    def __init__(self, log: Path, *arguments: str) -> None:
        self.arguments = [sys.executable, str(WORKER), *arguments]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        with self.log.open("ab") as errors:
            self.process = subprocess.Popen(self.arguments, env=env, stderr=errors)
        self.starts += 1

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.check_alive_until_killed()

    def check_alive_until_killed(self) -> None:
        if self.process is not None and self.process.poll() not in (None, -signal.SIGKILL):
            raise AssertionError(f"{self.arguments[2]} worker died on its own: {self.log.read_text()}")

    def restart(self) -> None:
        self.kill()
        self.start()


def wait_until(condition: Callable[[], bool], store: EventStore, *workers: Worker) -> None:
    deadline = time.monotonic() + CATCH_UP_SECONDS
    while not condition():
        for worker in workers:
            worker.check_alive_until_killed()
        assert time.monotonic() < deadline, f"stuck: {store.last_sequence()} events, cursor {store.cursor('effector')}"
        time.sleep(0.05)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'events.db'}"
    else:
        yield request.getfixturevalue("postgres_url")


def test_kill_9_mid_burst_loses_nothing_and_repeats_nothing(store_url: str, tmp_path: Path) -> None:
    log, effects = tmp_path / "kern.log", tmp_path / "effects.txt"
    log.touch()
    store = open_store(store_url)  # creates the tables before the workers race for it
    monitor = Worker(tmp_path / "monitor.err", "monitor", store_url, str(log), str(tmp_path / "monitor-state.json"))
    consumer = Worker(tmp_path / "consumer.err", "consumer", store_url, str(effects), "effector-0")
    chaos = random.Random(7)
    kill_after = sorted(chaos.sample(range(1, LINES // CHUNK), KILLS))
    try:
        monitor.start()
        consumer.start()
        with log.open("a") as handle:
            handle.write("".join(xid_line(i) + "\n" for i in range(CHUNK)))
        wait_until(lambda: store.cursor("effector") >= CHUNK, store, monitor, consumer)  # the sentinel is up
        for chunk, start in enumerate(range(CHUNK, LINES, CHUNK), start=1):
            with log.open("a") as handle:
                handle.write("".join(xid_line(i) + "\n" for i in range(start, start + CHUNK)))
            if chunk == LINES // CHUNK // 2:
                log.rename(tmp_path / "kern.log.1")  # logrotate in the middle of the burst
                log.touch()
            if chunk in kill_after:
                time.sleep(chaos.uniform(0.0, 0.3))  # let them get going, then pull the plug
                (monitor if chunk % 2 else consumer).restart()
            time.sleep(0.02)
        for worker in (monitor, consumer):
            worker.restart()  # one more crash after the burst ended
        wait_until(
            lambda: store.last_sequence() >= LINES and store.cursor("effector") >= store.last_sequence(),
            store,
            monitor,
            consumer,
        )
        time.sleep(0.5)  # anything left to (wrongly) ingest twice would arrive now
    finally:
        monitor.kill()
        consumer.kill()

    stored = store.events(limit=10 * LINES)
    assert [s.event.message for s in stored] == [xid_line(i) for i in range(LINES)]
    assert store.last_sequence() == LINES
    done = [int(line) for line in effects.read_text().split()]
    assert sorted(done) == list(range(1, LINES + 1))
    assert len(done) == len(set(done))
    statuses = {r.status for s in (1, LINES // 2, LINES) for r in store.stage_records(s)}
    assert statuses == {StageStatus.DONE}
    assert monitor.starts + consumer.starts == 2 + KILLS + 2
    store.close()
