from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from dsx import interrupts


def test_sigterm_unwinds_like_ctrl_c_and_the_old_handler_returns() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), interrupts.sigterm_as_keyboard_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


# A child whose SIGTERM is delivered to a thread other than the main one (`pthread_kill`): the
# main thread must still stop. Linux picks any thread for a process's signal; under load it was
# not the main one, and a main thread in an untimed `Event.wait()` slept through it.
_CHILD = """
import signal, sys, threading, time
from dsx import interrupts

def other_thread():
    time.sleep(0.3)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    time.sleep(30)

threading.Thread(target=other_thread, daemon=True).start()
finished = threading.Event()
interrupts.wait_for_stop(finished)
print("stopped", finished.is_set(), signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_wait_for_stop_returns_when_another_thread_takes_the_sigterm() -> None:
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=20)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["stopped", "True", "True"]


def test_wait_for_stop_returns_when_another_thread_finishes() -> None:
    finished = threading.Event()
    threading.Timer(0.1, finished.set).start()
    interrupts.wait_for_stop(finished)
    assert finished.is_set()
    assert signal.getsignal(signal.SIGTERM) is not None


def test_the_old_untimed_wait_misses_that_signal() -> None:
    """The failure the helper exists for, so the test above can fail: `Event.wait()` sleeps on."""
    untimed = "signal.signal(signal.SIGTERM, lambda *_: finished.set()); finished.wait()"
    old = _CHILD.replace("interrupts.wait_for_stop(finished)", untimed)
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", old], capture_output=True, text=True, timeout=3)
