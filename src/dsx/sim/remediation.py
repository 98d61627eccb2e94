"""The `sim` remediation provider: repairs a `dsx sim` node the way the simulator can.

A reboot takes the node NotReady through the simulator's fault annotation (a kwok stage), then
waits for it to report Ready again; a GPU reset is recorded only. The sentinel's composition
root (`dsx.controllers.sentinel_wiring`) builds it when the policy names `sim`, or for `--sim`
when the policy names no provider; nothing else in the sentinel knows it exists.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dsx import retry
from dsx.health.decisions import nodes
from dsx.health.decisions.ports import NodeChange, NodeOps, RemediationKind, RemediationRequest, RemediationResult

NOT_READY_ANNOTATION = "sim.dsx.run/not-ready"
"""The annotation the simulator's node-not-ready stage reacts to (`dsx sim inject --fault not-ready`)."""


class SimProvider:
    """Remediates `dsx sim` nodes: a reboot is a NotReady → Ready cycle driven by the simulator."""

    name = "sim"

    def __init__(
        self,
        node_ops: NodeOps,
        *,
        not_ready_annotation: str = NOT_READY_ANNOTATION,
        timeout_seconds: float = 120.0,
        poll_seconds: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nodes = node_ops
        self.not_ready_annotation = not_ready_annotation
        self.timeout_seconds = timeout_seconds
        self.poll_seconds = poll_seconds
        self._sleep, self._clock = sleep, clock

    def supports(self, kind: RemediationKind) -> bool:
        return kind in (RemediationKind.REBOOT_NODE, RemediationKind.RESET_GPU)

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        name = request.node_name
        if request.kind is RemediationKind.RESET_GPU:
            gpus = ", ".join(request.gpus) or "all GPUs"
            return RemediationResult(True, f"simulated GPU reset of {gpus} on {name}")
        if request.kind is not RemediationKind.REBOOT_NODE:
            return RemediationResult(False, f"the sim provider cannot {request.kind.value}")
        self.nodes.change_node(name, NodeChange(annotations={self.not_ready_annotation: "true"}))
        if not self._wait(name, want_ready=False):
            self.nodes.change_node(name, NodeChange(annotations={self.not_ready_annotation: None}))
            return RemediationResult(False, f"{name} did not go down within {self.timeout_seconds:g} s")
        self.nodes.change_node(name, NodeChange(annotations={self.not_ready_annotation: None}))
        if not self._wait(name, want_ready=True):
            return RemediationResult(
                False, f"{name} did not report Ready within {self.timeout_seconds:g} s of the reboot"
            )
        return RemediationResult(True, f"{name} rebooted (simulated) and Ready again")

    def _wait(self, name: str, *, want_ready: bool) -> bool:
        backoff = retry.Backoff(self.poll_seconds)
        for _ in retry.attempts(
            timeout_seconds=self.timeout_seconds, backoff=backoff, clock=self._clock, sleep=self._sleep
        ):
            if nodes.ready(self.nodes.get_node(name)) is want_ready:
                return True
        return False
