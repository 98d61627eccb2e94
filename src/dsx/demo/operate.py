"""The operate half of the demo: the sentinel running, an Xid 79, and the node's way back into service.

The sentinel pipeline (monitors → store → quarantine → drain → remediation → re-certification)
runs against the demo's cluster; the demo injects Xid 79 into another node's kernel log with
`dsx sim inject` and then only watches: each step waits for the node to reach the next state
of the pipeline's state machine and checks the marks the pipeline left on the Node.
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import TYPE_CHECKING, Protocol

from dsx import errors

if TYPE_CHECKING:
    from dsx.demo.lifecycle import Demo

OPERATE_STEPS = (
    ("fault", "Xid 79"),
    ("quarantine", "quarantine"),
    ("drain", "drain"),
    ("remediate", "remediate"),
    ("recertify", "re-certify"),
    ("uncordon", "uncordon"),
)


class Pipeline(Protocol):
    def stop(self) -> None: ...


def sentinel_available() -> str | None:
    """None when the sentinel pipeline is in this build, else why not."""
    if importlib.util.find_spec("dsx.controllers") is None:
        return "the sentinel pipeline (dsx.controllers) is not in this build"
    return None


class Steps:
    def __init__(self, demo: Demo) -> None:
        self.demo = demo

    def run(self, stack: contextlib.ExitStack) -> None:
        log = self.demo.log
        log.run("sentinel", "sentinel", self._start, needs=["cluster", "recipe"])
        previous = "sentinel"
        for name, title in OPERATE_STEPS:
            log.run(name, title, self._unavailable, needs=[previous])
            previous = name

    def _start(self) -> str:
        missing = sentinel_available()
        if missing is not None:
            raise errors.UnavailableError(f"cannot start the sentinel: {missing}")
        raise errors.UnavailableError("cannot start the sentinel: not wired into dsx demo yet")

    def _unavailable(self) -> str:
        raise errors.UnavailableError("the sentinel is not running")
