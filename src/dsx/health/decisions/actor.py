"""One actor per store: a sentinel that acts on nodes registers in the store it shares.

Why: two sentinels acting on one store without leader election split the store's claims between
them and each acts on half the events with its own view of the nodes; in one run a node was left
cordoned while the store and `/metrics` said healthy. Leader election makes replicas take turns;
this claim stops the configuration leader election does not cover: a second sentinel (another
machine, another namespace, a forgotten terminal) started on the same store.

The claim is one shared document in the store (`EventStore.update_breaker`, which reads, decides
and writes in one transaction). An acting sentinel takes it when it starts acting and renews it
every `RENEW_SECONDS`; `decide` lets another take it only when

- nobody holds it, or the holder released it (a clean stop),
- the holder is gone: a process on this host that no longer runs (the caller says so: a crashed
  sentinel restarted on its machine acts again at once), or one that stopped renewing for
  `STALE_SECONDS` (crashed elsewhere: nothing is left to overlap with),
- both elect a leader through the same Lease (the Lease, not the store, says who acts; a new
  leader takes over from the old at once).

Anything else is refused with a `ConflictError` naming the holder, and the sentinel does not act.
A holder whose renewal finds another's name has lost the claim (it had stopped renewing long
enough to be taken over) and stops acting, like a leader that lost its Lease.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dsx.errors import ConflictError

DOCUMENT = "sentinel-actor"
"""The store document holding the claim (beside the breakers' documents)."""
RENEW_SECONDS = 5.0
STALE_SECONDS = 30.0
"""A claim not renewed this long is a crashed holder's: six missed renewals."""


@dataclass(frozen=True)
class Actor:
    """Who claims: `instance` unique per process (`host-pid`), on `host` as `pid`; `lease` the
    Lease (`namespace/name`) it was elected through, empty without leader election."""

    instance: str
    host: str = ""
    pid: int = 0
    lease: str = ""

    def describe(self) -> str:
        return (
            f"{self.instance} (leader of Lease {self.lease})" if self.lease else f"{self.instance} (no leader election)"
        )


@dataclass(frozen=True)
class Claim:
    actor: Actor
    since: datetime
    renewed: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.actor.instance,
            "host": self.actor.host,
            "pid": self.actor.pid,
            "lease": self.actor.lease,
            "since": self.since.isoformat(),
            "renewed": self.renewed.isoformat(),
        }

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Claim | None:
        """None for a released claim (no instance) or a document this version cannot read."""
        instance = str(document.get("instance") or "")
        if not instance:
            return None
        try:
            since = datetime.fromisoformat(str(document["since"]))
            renewed = datetime.fromisoformat(str(document["renewed"]))
            pid = int(document.get("pid") or 0)
        except (KeyError, ValueError, TypeError):
            return None
        actor = Actor(instance, str(document.get("host") or ""), pid, str(document.get("lease") or ""))
        return cls(actor, since, renewed)


def decide(
    current: Mapping[str, Any] | None, me: Actor, now: datetime, *, gone: Callable[[Actor], bool]
) -> dict[str, Any]:
    """The claim document to write for `me` at `now`, or ConflictError when another acts on the store.

    `gone(holder)`: whether the holder's process is known to have ended (its host is this one and
    its pid runs no more); quick and side-effect free, it runs inside the store's transaction.
    """
    held = Claim.from_dict(current) if current is not None else None
    if held is None or held.actor.instance == me.instance:
        since = held.since if held is not None else now
        return Claim(me, since, now).to_dict()
    idle = now - held.renewed
    if idle >= timedelta(seconds=STALE_SECONDS) or gone(held.actor):
        return Claim(me, now, now).to_dict()
    if me.lease and held.actor.lease == me.lease:
        return Claim(me, now, now).to_dict()
    raise ConflictError(
        f"event store: another sentinel acts on it: {held.actor.describe()}, acting since"
        f" {held.since.isoformat(timespec='seconds')}, renewed {idle.total_seconds():.0f} s ago. Two sentinels"
        " acting on one store overlap; run every replica with --leader-elect (the same Lease), give this one"
        " another --store, or stop the other"
    )


def renewal(current: Mapping[str, Any] | None, me: Actor, now: datetime) -> dict[str, Any] | None:
    """The renewed document, or None when another holds the claim now (this actor has lost it)."""
    held = Claim.from_dict(current) if current is not None else None
    if held is not None and held.actor.instance != me.instance:
        return None
    return Claim(me, held.since if held is not None else now, now).to_dict()


def released(current: Mapping[str, Any] | None, me: Actor) -> dict[str, Any] | None:
    """The released document when `me` holds the claim; None (write nothing) otherwise."""
    held = Claim.from_dict(current) if current is not None else None
    if held is None or held.actor.instance != me.instance:
        return None
    return {"instance": "", "host": "", "pid": 0, "lease": "", "since": "", "renewed": ""}
