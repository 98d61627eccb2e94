"""SIGTERM unwinds like Ctrl-C, so commands that create things (clusters, Jobs) clean up when killed.

Shared by every long-running command (`dsx certify run`, `dsx validate --phase performance`,
`dsx demo`): a CI cancel or `kill` must delete what the run created, exactly as Ctrl-C does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def sigterm_as_keyboard_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (only the main thread can take signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


STOP_POLL_SECONDS = 0.2


def wait_for_stop(finished: threading.Event, *, poll_seconds: float = STOP_POLL_SECONDS) -> None:
    """Block the main thread until SIGTERM or SIGINT arrives, or another thread sets `finished`;
    `finished` is set on return either way.

    Why a poll and not `finished.wait()`: Linux may deliver a process's SIGTERM to any of its
    threads, and CPython runs the Python handler only when the main thread next executes bytecode.
    A main thread asleep in an untimed lock wait is not woken then: a sentinel under load ignored
    SIGTERM until the kubelet's SIGKILL. The handler only sets a flag: a handler that took the
    Event's lock could interrupt the main thread inside `Event.wait` while it holds that lock."""
    if threading.current_thread() is not threading.main_thread():
        finished.wait()
        return
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {number: signal.signal(number, handler) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not received and not finished.wait(poll_seconds):
            pass
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
    finished.set()
