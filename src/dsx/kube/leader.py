"""Leader election through a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

Why: the sentinel runs as several replicas so that one lost pod does not stop every node's
recovery, but only one of them may act on nodes at a time. The Lease is the lock:

- a **candidate** reads the Lease every `retry_period_seconds`. It takes it when there is none,
  when it is released (no holder), or when its record has not changed for
  `lease_duration_seconds` of the candidate's own clock (the holder stopped renewing). Expiry
  is judged from when this candidate *saw* the record change, never from the holder's
  `renewTime`, so clock skew between hosts cannot shorten a lease;
- the **leader** renews every `retry_period_seconds`. When no renewal succeeded for
  `renew_deadline_seconds` (shorter than the lease), it has lost and must stop acting at once:
  `on_stopped_leading` is called and the sentinel process exits, so no half-stopped worker
  keeps patching nodes after a standby may have taken over;
- every write is a compare-and-swap on the Lease's resourceVersion, so two candidates racing
  for an expired Lease cannot both win.

Defaults are client-go's: 15 s lease, 10 s renew deadline, 2 s retry period. A leader that
stops cleanly releases the Lease (`release`), so a standby takes over within one retry period.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from dsx import errors, settings

log = logging.getLogger("dsx.leader")

LEASE_DURATION_SECONDS = settings.LEADER_LEASE_DURATION_SECONDS
RENEW_DEADLINE_SECONDS = settings.LEADER_RENEW_DEADLINE_SECONDS
RETRY_PERIOD_SECONDS = settings.LEADER_RETRY_PERIOD_SECONDS


def default_identity(pod_name: str | None = None) -> str:
    """The pod's name in Kubernetes (unique per replica, readable in the Lease), else hostname-pid.

    The entry point reads $POD_NAME and passes it; nothing here reads the environment.
    """
    return pod_name or f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class ElectionSettings:
    namespace: str
    name: str = "dsx-sentinel"
    identity: str = field(default_factory=default_identity)
    lease_duration_seconds: float = LEASE_DURATION_SECONDS
    renew_deadline_seconds: float = RENEW_DEADLINE_SECONDS
    retry_period_seconds: float = RETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        if not (self.lease_duration_seconds > self.renew_deadline_seconds > self.retry_period_seconds > 0):
            raise errors.BadInputError(
                "leader election: need lease duration > renew deadline > retry period > 0; got"
                f" {self.lease_duration_seconds:g} s, {self.renew_deadline_seconds:g} s,"
                f" {self.retry_period_seconds:g} s"
            )
        if not self.identity:
            raise errors.BadInputError("leader election: the identity is empty (set POD_NAME)")

    @property
    def request_timeout_seconds(self) -> float:
        """Per API call. A leader notices a lost lease at worst one call after its renew deadline;
        half the margin between renew deadline and lease duration keeps that before a standby
        can take over."""
        margin = self.lease_duration_seconds - self.renew_deadline_seconds
        return max(1.0, min(self.retry_period_seconds, margin / 2))


class Leases(Protocol):
    """The three Lease calls of `dsx.kube.client.KubeClient`."""

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]: ...


def micro_time(moment: datetime) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Run `run(stop)` in a thread; `on_started_leading` / `on_stopped_leading` are called from it."""

    def __init__(
        self,
        leases: Leases,
        settings: ElectionSettings,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.leases = leases
        self.settings = settings
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._monotonic = monotonic
        self._now = now
        self._observed_version: str | None = None
        self._observed_at = 0.0
        self._holder = ""
        self._lock = threading.Lock()
        self.leading = False

    @property
    def holder(self) -> str:
        """The holder in the last record seen ('' when none)."""
        return self._holder

    def run(self, stop: threading.Event) -> None:
        """Campaign until elected, lead until the lease is lost or `stop` is set."""
        settings = self.settings
        while not stop.is_set():
            if self.try_acquire_or_renew():
                break
            stop.wait(self._until_next_try())
        if stop.is_set():
            return
        with self._lock:
            self.leading = True
        log.info(
            "became leader", extra={"lease": f"{settings.namespace}/{settings.name}", "identity": settings.identity}
        )
        try:
            self._on_started()
        except Exception:
            # half started is worse than not at all: step down the same way as a lost lease
            log.exception("starting to lead failed", extra={"lease": f"{settings.namespace}/{settings.name}"})
            with self._lock:
                self.leading = False
            self._on_stopped()
            return
        renewed = self._monotonic()
        while not stop.wait(settings.retry_period_seconds):
            if self.try_acquire_or_renew():
                renewed = self._monotonic()
                continue
            late = self._monotonic() - renewed
            taken = self._holder not in ("", settings.identity)
            if late >= settings.renew_deadline_seconds or taken:
                with self._lock:
                    self.leading = False
                log.error(
                    "lost the leader lease",
                    extra={
                        "lease": f"{settings.namespace}/{settings.name}",
                        "identity": settings.identity,
                        "holder": self._holder,
                        "seconds_since_renewal": round(late, 3),
                    },
                )
                self._on_stopped()
                return

    def _until_next_try(self) -> float:
        """A retry period, or less when the observed lease expires sooner (take over on time)."""
        retry = self.settings.retry_period_seconds
        if not self._holder:
            return retry
        expires_in = self._observed_at + self.settings.lease_duration_seconds - self._monotonic()
        return max(0.05, min(retry, expires_in + 0.01))

    def try_acquire_or_renew(self) -> bool:
        """One attempt; False when another holds a live lease, a write lost a race, or the API failed."""
        settings = self.settings
        try:
            current = self.leases.get_lease(settings.namespace, settings.name)
            if current is None:
                created = self.leases.create_lease(self._record(None))
                self._observe(created)
                return True
            self._observe(current)
            spec = current.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            expired = self._monotonic() >= self._observed_at + settings.lease_duration_seconds
            if holder and holder != settings.identity and not expired:
                return False
            replaced = self.leases.replace_lease(self._record(current))
            self._observe(replaced)
            return True
        except errors.ConflictError:
            return False  # another candidate wrote first; read again next time
        except errors.DsxError as exc:
            log.warning("leader election: %s", exc, extra={"lease": f"{settings.namespace}/{settings.name}"})
            return False

    def _observe(self, lease: Mapping[str, Any]) -> None:
        version = str((lease.get("metadata") or {}).get("resourceVersion", ""))
        if version != self._observed_version:
            self._observed_version = version
            self._observed_at = self._monotonic()
        self._holder = str((lease.get("spec") or {}).get("holderIdentity") or "")

    def _record(self, current: Mapping[str, Any] | None) -> dict[str, Any]:
        settings = self.settings
        now = micro_time(self._now())
        metadata: dict[str, Any] = {"name": settings.name, "namespace": settings.namespace}
        spec: dict[str, Any] = {
            "holderIdentity": settings.identity,
            "leaseDurationSeconds": max(1, round(settings.lease_duration_seconds)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        if current is not None:
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
            old = current.get("spec") or {}
            transitions = int(old.get("leaseTransitions") or 0)
            if old.get("holderIdentity") == settings.identity:
                spec["acquireTime"] = old.get("acquireTime") or now
                spec["leaseTransitions"] = transitions
            else:
                spec["leaseTransitions"] = transitions + 1
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def release(self) -> bool:
        """Give the Lease up after a clean stop (holder cleared), so a standby takes over at once."""
        with self._lock:
            if not self.leading:
                return False
            self.leading = False
        settings = self.settings
        try:
            current = self.leases.get_lease(settings.namespace, settings.name)
            if current is None or (current.get("spec") or {}).get("holderIdentity") != settings.identity:
                return False
            record = self._record(current)
            record["spec"].update(holderIdentity=None, leaseDurationSeconds=1, acquireTime=None)
            self.leases.replace_lease(record)
        except errors.DsxError as exc:
            log.warning("leader election: could not release the lease: %s", exc)
            return False
        log.info("released the leader lease", extra={"lease": f"{settings.namespace}/{settings.name}"})
        return True
