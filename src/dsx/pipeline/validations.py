"""Running validation requests: at most `max_running` at once, on a thread pool of their own.

What a request is and when a node needs one is decided in `dsx.health.decisions.validation_requests`;
this runner starts them through a `Recertifier`, resumes the ones a stopped sentinel left RUNNING,
and never lets two group tests share a node.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

from dsx.errors import ConflictError
from dsx.health.decisions import nodes
from dsx.health.decisions.eventstore import EventStore, ValidationRequest, ValidationStatus
from dsx.health.decisions.policy import CertificationSettings, SentinelPolicy, Stage
from dsx.health.decisions.ports import (
    NodeChange,
    NodeOps,
    Observer,
    RecertificationRequest,
    RecertificationResult,
    Recertifier,
)
from dsx.health.decisions.validation_requests import ValidationKind, kind_of
from dsx.model.health import NodeState

log = logging.getLogger("dsx.sentinel")


# -- running requests ----------------------------------------------------------------------------


class ValidationRunner:
    """Runs open requests through a Recertifier, at most `max_running` at once (`workers=0`: inline)."""

    def __init__(
        self,
        store: EventStore,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        recertifier: Recertifier,
        observer: Observer,
        *,
        workers: int | None = None,
    ) -> None:
        self.store = store
        self.nodes = node_ops
        self.settings: CertificationSettings = policy.certification
        self.selector = policy.gpu_node_selector
        self.switch = policy.switch(Stage.VALIDATION)
        self.recertifier = recertifier
        self.observer = observer
        count = self.settings.max_running if workers is None else workers
        self._pool = ThreadPoolExecutor(count, thread_name_prefix="validation") if count else None
        self._running: dict[int, Future[None]] = {}
        self._unsettled: dict[int, tuple[ValidationRequest, RecertificationResult]] = {}
        """Finished runs whose result the node or the store did not take yet."""
        self._resumed = False
        self._lock = threading.RLock()
        self._groups: dict[int, frozenset[str]] = {}
        """Request id → the nodes its run uses (the node and its peers): no node is in two at once."""
        self._freed = threading.Condition(self._lock)

    def step(self) -> int:
        """Settle finished runs, then start what the limit allows (resuming interrupted requests first).

        Returns how many requests started or settled. Errors end well: a run's result is kept
        until the node write and the store both took it (retried here, the certification is not
        run again), and a failed start makes the next step look for RUNNING requests again.
        """
        with self._lock:
            for request_id in [i for i, f in self._running.items() if f.done()]:
                error = self._running.pop(request_id).exception()
                if error is not None:  # _run keeps what it expects; anything else is a bug, and is shown
                    log.error("validation request %s: %s", request_id, error, exc_info=error)
                    self._resumed = False
            settled = sum(self._settle(request, result) for request, result in list(self._unsettled.values()))
            batch: list[ValidationRequest] = []
            try:
                if not self._resumed:
                    held = set(self._running) | set(self._unsettled)
                    batch.extend(
                        r for r in self.store.validation_requests(ValidationStatus.RUNNING) if r.request_id not in held
                    )
                    self._resumed = True
                batch.extend(self.store.start_validations(self.settings.max_running))
            except Exception:
                self._resumed = False  # a start may have committed: pick it up as RUNNING next time
                raise
            for request in batch:
                if request.request_id in self._running or request.request_id in self._unsettled:
                    continue
                if self._pool is None:
                    self._run(request)
                    continue
                self._running[request.request_id] = self._pool.submit(self._run, request)
            return len(batch) + settled

    @property
    def running(self) -> int:
        with self._lock:
            return sum(1 for f in self._running.values() if not f.done())

    def _run(self, request: ValidationRequest) -> None:
        kind = kind_of(request)
        name = request.node_name
        held = kind is not ValidationKind.RECERTIFY
        try:
            if held:
                self._mark(name, f"running (request {request.request_id})", hold=True)
            ask = RecertificationRequest(
                node_name=name,
                categories=tuple(c.name for c in self.settings.categories),
                peers=self._reserve(name, request.request_id, group=held),
                group_categories=self.settings.group_categories if held else (),
                request_id=request.request_id,
            )
            self.observer.action("validation", "certify", name, {"request_id": request.request_id, "kind": kind.value})
            result = self.recertifier.recertify(ask)
        except Exception as exc:  # a broken run is a failed validation, never a silent pass
            log.exception("validation request %s for %s failed to run", request.request_id, name)
            result = RecertificationResult(False, f"could not run: {exc}"[:500])
        finally:
            with self._freed:
                self._groups.pop(request.request_id, None)
                self._freed.notify_all()
        self._settle(request, result)

    def _settle(self, request: ValidationRequest, result: RecertificationResult) -> int:
        """Node first, then the store: the store never says `passed` while the node is still held.

        On an error the result waits in `_unsettled` for the next step; the traceback is logged
        once per request. Returns 1 when settled.
        """
        name = request.node_name
        held = kind_of(request) is not ValidationKind.RECERTIFY
        detail = "passed" if result.passed else result.reason
        try:
            if held:
                self._conclude(name, request, passed=result.passed, detail=detail)
            self._finish(request, passed=result.passed, detail=detail)
        except Exception as exc:
            with self._lock:
                first = request.request_id not in self._unsettled
                self._unsettled[request.request_id] = (request, result)
            log.warning(
                "validation request %s for %s: recording the result failed, will retry: %s",
                request.request_id,
                name,
                exc,
                exc_info=exc if first else None,
                extra={"node": name, "request_id": request.request_id},
            )
            return 0
        with self._lock:
            self._unsettled.pop(request.request_id, None)
        self.observer.action(
            "validation",
            "passed" if result.passed else "failed",
            name,
            {"request_id": request.request_id, "detail": detail},
        )
        if held and self.switch.acting:
            reason_text, message = (
                ("ValidationPassed", f"validation request {request.request_id} passed")
                if result.passed
                else ("ValidationFailed", f"request {request.request_id}: {detail}")
            )
            try:  # a Kubernetes Event is for people reading `describe node`; losing one is not worth a retry
                self.nodes.record_event(name, reason_text, message, warning=not result.passed)
            except Exception as exc:
                log.warning("validation request %s: node event not recorded: %s", request.request_id, exc)
        return 1

    def _finish(self, request: ValidationRequest, *, passed: bool, detail: str) -> None:
        """finish_validation, where a retry after a lost answer finds the request already finished."""
        wanted = ValidationStatus.PASSED if passed else ValidationStatus.FAILED
        try:
            self.store.finish_validation(request.request_id, passed=passed, detail=detail)
        except ConflictError:
            now = next((r for r in self.store.validation_requests() if r.request_id == request.request_id), None)
            if now is None or now.status is not wanted:
                raise

    def _reserve(self, node_name: str, request_id: int, *, group: bool) -> tuple[str, ...]:
        """Reserve the node, and for a group test `group_peers` known-good peers no other run uses.

        While fewer are free than the fleet has, the run waits for another to end (up to
        `run_timeout_seconds`, then it fails: a group test beside a node another test is
        loading would measure both). Released when the run ends."""
        deadline = time.monotonic() + self.settings.run_timeout_seconds
        while True:
            candidates = self._peers(node_name) if group else ()
            wanted = min(self.settings.group_peers, len(candidates))
            with self._freed:
                busy: set[str] = set().union(*self._groups.values())
                if node_name not in busy:
                    free = tuple(c for c in candidates if c not in busy)[:wanted]
                    if len(free) == wanted:
                        self._groups[request_id] = frozenset({node_name, *free})
                        return free
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(
                        f"no free known-good peer for {node_name} within {self.settings.run_timeout_seconds:.0f} s: "
                        f"every candidate is in another group test ({', '.join(sorted(busy)[:5])})"
                    )
                self._freed.wait(min(left, 1.0))

    def _peers(self, node_name: str) -> tuple[str, ...]:
        """Known-good nodes to test alongside: healthy in the store, schedulable, not held for validation
        (every one, sorted; `_reserve` takes those no other run uses)."""
        unhealthy = {s.node_name for s in self.store.node_states() if s.state is not NodeState.HEALTHY}
        candidates = [
            nodes.name(n)
            for n in self.nodes.list_nodes(dict(self.selector))
            if nodes.name(n) != node_name
            and nodes.name(n) not in unhealthy
            and not nodes.unschedulable(n)
            and not nodes.has_taint(n, self.settings.taint.key)
        ]
        return tuple(sorted(candidates))

    def _mark(self, name: str, text: str, *, hold: bool) -> None:
        if not self.switch.acting:
            return
        change = NodeChange(
            add_taints=(self.settings.taint,) if hold else (),
            annotations={nodes.VALIDATION_ANNOTATION: text[:500]},
        )
        self.nodes.change_node(name, change)

    def _conclude(self, name: str, request: ValidationRequest, *, passed: bool, detail: str) -> None:
        if not self.switch.acting:
            return
        if passed:
            self.nodes.change_node(
                name,
                NodeChange(
                    remove_taints=(self.settings.taint.key,),
                    labels={nodes.CERTIFIED_LABEL: "true"},
                    annotations={nodes.VALIDATION_ANNOTATION: f"passed (request {request.request_id}) at {_stamp()}"},
                ),
            )
        else:
            self._mark(name, f"failed (request {request.request_id}): {detail}", hold=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
