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
