"""Area of concern: last round's leftovers of issue 29, each a wrong exit code or a broken log
line: a symlink loop as a kernel-log path is bad input (2), not "unavailable" (6); a 5,000-
character log profile name is an unknown name, not an internal error (8); the local worker
server never prints a traceback into the sentinel's JSON log when its reader goes away, and
whatever it prints becomes log records. (Token files: tests/unit/api/test_security.py.)"""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from dsx.certify.parsing import profiles
from dsx.errors import BadInputError, NotFoundError
from dsx.executors.local import executor
from dsx.host.kernel_log import FileFollower


def test_a_symlink_loop_as_the_kernel_log_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(BadInputError, match="not a log file: Too many levels of symbolic links") as refused:
        FileFollower(tmp_path / "a").read(10)
    assert refused.value.exit_code == 2


def test_a_very_long_profile_name_is_an_unknown_name() -> None:
    with pytest.raises(NotFoundError, match="allowed values: composer, deepspeed, dsx-train") as refused:
        profiles.load("a" * 5000)
    assert len(refused.value.message) < 400


def test_what_the_worker_server_prints_becomes_log_records(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dsx.executors.local"):
        executor._log_lines(io.BytesIO(b"Traceback (most recent call last):\n\n  File x\n\xff bytes\n"))
    assert [r.getMessage() for r in caplog.records] == [
        "local worker server: Traceback (most recent call last):",
        "local worker server:   File x",
        "local worker server: \ufffd bytes",
    ]


@pytest.mark.timeout(300)
def test_the_worker_server_ends_quietly_when_its_reader_goes_away() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "dsx.executors.local.worker", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdout is not None
    server.stdout.close()  # the executor is gone before the server said it is ready
    _, errors = server.communicate(timeout=240)
    assert server.returncode == 0
    assert b"Traceback" not in errors and b"BrokenPipeError" not in errors
