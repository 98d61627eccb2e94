"""Control-plane processes: started in their own process group, tracked by PID and start time.

A PID alone can be reused after a crash, so each record also keeps the kernel's start time
of the process; we only signal a PID whose start time still matches. Stopping sends SIGTERM
to the whole group, waits, then SIGKILLs what is left, so nothing survives `dsx sim down`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
EXIT_STATUS_WAIT_SECONDS = 2.0
"""How long `exit_description` waits for the status of a child already seen gone."""


@dataclass(frozen=True)
class ProcessRecord:
    component: str
    pid: int
    start_ticks: int
    log: str

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "pid": self.pid, "startTicks": self.start_ticks, "log": self.log}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ProcessRecord:
        return cls(str(raw["component"]), int(raw["pid"]), int(raw["startTicks"]), str(raw["log"]))


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from /proc, or None when the PID is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


_children: dict[int, subprocess.Popen[bytes]] = {}
"""Components this interpreter started, by PID. Holding the Popen keeps subprocess's own clean-up
from reaping them behind our back, so how each one ended stays known."""


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None:
        child.poll()
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def exit_description(record: ProcessRecord) -> str:
    """How a finished component ended: 'exited with status 1', 'was killed by SIGKILL', or 'exited'.

    The status is known only for processes this interpreter started (its children); one
    started by an earlier `dsx sim up` can only be seen to be gone.
    """
    child = _children.get(record.pid)
    code = child.poll() if child is not None else None
    if code is None and child is not None:
        # seen gone (a zombie in /proc) a moment before the kernel lets its parent collect the
        # status: wait for it briefly rather than report an exit without its cause
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = child.wait(timeout=EXIT_STATUS_WAIT_SECONDS)
    if code is None:
        return "exited"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


def alive(record: ProcessRecord) -> bool:
    """True while the recorded process (same PID and start time) runs and is not a zombie."""
    stat = _stat(record.pid)
    if stat is None or stat[1] != record.start_ticks:
        return False
    if stat[0] in ("Z", "X"):
        _reap(record.pid)
        return False
    return True


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start(
    component: str,
    argv: Sequence[str],
    log: Path,
    *,
    die_with_parent: bool = False,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> ProcessRecord:
    """Start a component detached in its own session, output appended to `log`.

    `env` replaces the inherited environment; `extra_env` adds to it (a component's own folder)."""
    if extra_env:
        env = {**(os.environ if env is None else env), **extra_env}
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=dict(env) if env is not None else None,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    # the process outlives this call (and `dsx sim up` itself); `alive()` reaps it if it exits
    # while this interpreter is its parent, and `exit_description()` tells how it ended
    _children[process.pid] = process
    stat = _stat(process.pid)
    return ProcessRecord(component, process.pid, stat[1] if stat else 0, str(log))


def stop(records: Iterable[ProcessRecord], *, grace_seconds: float = 10.0) -> list[str]:
    """Stop the recorded processes (their whole groups); returns components that needed SIGKILL."""
    running = [r for r in records if alive(r)]
    for record in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(alive(r) for r in running):
        time.sleep(0.05)
    killed = []
    for record in running:
        if alive(record):
            killed.append(record.component)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(alive(r) for r in running):
        time.sleep(0.05)
    return killed


def strays(marker: str) -> list[int]:
    """PIDs of live processes whose command line mentions `marker` (a cluster's state folder)."""
    found = []
    own = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return sorted(found)


def kill_pids(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)


LOG_TAIL_BYTES = 64 * 1024
"""How much of a log's end is read for its tail: a crash loop's log can be large."""


def log_tail(path: Path, lines: int = 5) -> str:
    """The last non-empty lines of a component log joined by ' | ', for one-line error messages."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])
