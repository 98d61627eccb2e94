from __future__ import annotations

import os
import signal

import pytest

from dsx import interrupts


def test_sigterm_unwinds_like_ctrl_c_and_the_old_handler_returns() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), interrupts.sigterm_as_keyboard_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before
