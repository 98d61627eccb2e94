"""A sentinel process for the crash test, killed with SIGKILL at random moments by the test.

    crash_worker.py monitor  STORE_URL LOG_PATH STATE_PATH   # kernel log → store
    crash_worker.py consumer STORE_URL EFFECTS_PATH OWNER     # store → an effect per event

The consumer follows the stage protocol of dsx.health.decisions.eventstore: record intent (`begin`),
check whether the effect already happened (here: is the sequence in the effects file — the
stand-in for "is the node already cordoned?"), do it if not, then `ack`. The effect is one
append of "<sequence>\\n" to the effects file; the test asserts every event's effect is there
exactly once.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from dsx.health.decisions.eventstore import StageOutcome, StageStatus
from dsx.host import kernel_log
from dsx.pipeline import source
from dsx.store import open_store

CONSUMER = "effector"


def run_monitor(url: str, log_path: str, state_path: str) -> None:
    store = open_store(url)
    monitor = kernel_log.KernelLogMonitor(
        "n1", kernel_log.FileFollower(log_path), state_path, batch_lines=37, dedup_window_seconds=1.0
    )
    if monitor.replaying:
        print("replaying the batch read before the crash", file=sys.stderr)
    source.run(monitor, store, interval_seconds=0.02, stop=threading.Event())


def run_consumer(url: str, effects_path: str, owner: str) -> None:
    store = open_store(url)
    path = Path(effects_path)
    done = {int(line) for line in path.read_text().split()} if path.exists() else set()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    while True:
        batch = store.claim(CONSUMER, owner, limit=13)
        if not batch:
            store.wait_for_events(store.last_sequence(), 0.2)
            continue
        for stored in batch:
            previous = store.begin(CONSUMER, stored.sequence, {"effect": "append"})
            if previous is not None:
                print(f"recovering {stored.sequence}: effect already done: {stored.sequence in done}", file=sys.stderr)
            if stored.sequence not in done:  # reconcile: was the effect done before a crash?
                os.write(descriptor, f"{stored.sequence}\n".encode())
                os.fsync(descriptor)
                done.add(stored.sequence)
            store.ack(CONSUMER, owner, [StageOutcome(stored.sequence, StageStatus.DONE, {"effect": "appended"})])


if __name__ == "__main__":
    mode, *arguments = sys.argv[1:]
    {"monitor": run_monitor, "consumer": run_consumer}[mode](*arguments)
