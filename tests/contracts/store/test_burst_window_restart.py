"""Area of concern: a kernel-log monitor's duplicate window survives restarts.

The windows are rebuilt from the events the monitor stored before it was killed, so a storm of
one Xid read across three restarts within its window is still one event (it was four)."""

from __future__ import annotations

from pathlib import Path

from dsx.controllers import monitors
from dsx.host.kernel_log import FileFollower, KernelLogMonitor
from dsx.store import open_store

LINE = "[31609.615516] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.\n"


def _run_once(log: Path, state: Path, url: str) -> int:
    """One monitor process: start (restoring from the store), read what is there, stop."""
    store = open_store(url)
    try:
        monitor = KernelLogMonitor("node-1", FileFollower(str(log)), state)
        return monitors.run_source(monitor, monitors.StoreSink(store), interval_seconds=0, once=True)
    finally:
        store.close()


def test_300_identical_lines_over_three_restarts_are_one_event(tmp_path: Path) -> None:
    log, state, url = tmp_path / "kern.log", tmp_path / "state.json", f"sqlite:///{tmp_path / 'events.db'}"
    sent = []
    for _ in range(4):  # the first start and three restarts, 75 more lines each time
        with log.open("a") as file:
            file.write(LINE * 75)
        sent.append(_run_once(log, state, url))

    assert sent == [1, 0, 0, 0]
    store = open_store(url)
    assert len(store.events()) == 1


def test_a_new_window_opens_once_the_old_one_has_closed(tmp_path: Path) -> None:
    """Restoring reopens only windows still open: the same Xid after the window is a new event."""
    log, state, url = tmp_path / "kern.log", tmp_path / "state.json", f"sqlite:///{tmp_path / 'events.db'}"
    log.write_text(f"2026-11-29T10:00:00+00:00 host kernel: {LINE.split('] ', 1)[1]}")
    assert _run_once(log, state, url) == 1
    with log.open("a") as file:
        file.write(f"2026-11-29T10:00:05+00:00 host kernel: {LINE.split('] ', 1)[1]}")
        file.write(f"2026-11-29T10:00:20+00:00 host kernel: {LINE.split('] ', 1)[1]}")
    assert _run_once(log, state, url) == 1  # 10:00:05 is inside the 10:00 window (10 s, fatal), 10:00:20 is not
