"""Circuit breaker: stop quarantining when too much of the fleet is out of service at once.

Why: a monitor bug, a bad driver rollout or a fabric-wide event can make every node look
faulty; cordoning them all would take the cluster down in the name of health. Before each new
quarantine the breaker counts nodes (this one included) and trips when the count is more than
the limit: `max_quarantined_percent` of the GPU nodes (those `gpuNodeSelector` matches, rounded
down, but never less than one node, so a small fleet can still quarantine its first faulty node),
or `max_quarantined_nodes` when that is lower (a fleet of 5,000 at 10 % would otherwise lose
500). What it counts is the mode:

- `Level` (the default): the nodes the sentinel holds out of service now, in any state from
  quarantined to failed, however long ago they went, plus those admitted in the last
  `ADMISSION_GRACE_SECONDS` whose move the store does not show yet. A node released back to
  service no longer counts; twenty nodes held for a week count as twenty.
- `Rate`: the distinct nodes whose quarantine began within `window_seconds`.

A tripped breaker refuses this and every later quarantine until a person resets it (`dsx
sentinel breaker reset`); it never holds back a release: re-certified nodes go back into
service while it is tripped. A reset also forgets the window, so the events refused while it
was open are not replayed (NVSentinel #450); in Level mode the next quarantine is judged by the
level at that moment.

The state is a document in the event store, so a restart keeps a tripped breaker tripped, and
each decision is one atomic `update_breaker` (read, decide, record in one transaction), so
sentinel replicas sharing a store admit no more than the limit between them. Times are the
events' store times, so a replay trips where the live run did.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dsx.health.decisions.eventstore import EventStore
from dsx.health.decisions.policy import BreakerMode, BreakerSettings
from dsx.model.health import NodeState

NAME = "quarantine"
ADMISSION_GRACE_SECONDS = 300.0
"""Level mode: an admitted node counts this long even before the store shows it quarantined."""


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    TRIPPED = "tripped"


@dataclass(frozen=True)
class Admission:
    allowed: bool
    state: BreakerState
    tripped_now: bool
    """This call tripped the breaker (report it once)."""
    quarantined_in_window: int
    fleet_size: int
    reason: str = ""


class CircuitBreaker:
    """One breaker persisted under `name` in the store.

    Every decision is one `EventStore.update_breaker` call: read the window, decide, record,
    in one transaction. So any number of breakers on one store (threads, sentinel replicas on
    separate connections) admit no more than the limit between them.
    """

    def __init__(
        self,
        store: EventStore,
        settings: BreakerSettings,
        fleet_size: Callable[[], int],
        *,
        name: str = NAME,
    ) -> None:
        self.store = store
        self.settings = settings
        self.name = name
        self._fleet_size = fleet_size

    def _load(self) -> dict[str, Any]:
        return _or_closed(self.store.load_breaker(self.name))

    def state(self) -> BreakerState:
        return BreakerState(self._load()["state"])

    def status(self) -> dict[str, Any]:
        """The stored document: state, window, when and why it tripped, how often it was reset."""
        document = self._load()
        document["name"] = self.name
        return document

    def admit(self, node_name: str, at: datetime) -> Admission:
        """May `node_name` be quarantined at `at`? Records it in the window when allowed."""
        if not self.settings.enabled:
            return Admission(True, BreakerState.CLOSED, False, 0, 0)
        fleet = max(self._fleet_size(), 1)  # before the transaction: it may ask the cluster
        held: frozenset[str] = frozenset()
        if self.settings.mode is BreakerMode.LEVEL:
            held = frozenset(s.node_name for s in self.store.node_states() if s.state is not NodeState.HEALTHY)

        def decide(stored: dict[str, Any] | None) -> tuple[dict[str, Any] | None, Admission]:
            return self._decide(_or_closed(stored), node_name, at, fleet, held)

        return self.store.update_breaker(self.name, decide)

    def limit(self, fleet: int) -> int:
        """Nodes the breaker lets be counted at once for a fleet of `fleet` GPU nodes."""
        by_share = allowed_nodes(fleet, self.settings.max_quarantined_percent)
        cap = self.settings.max_quarantined_nodes
        return by_share if cap is None else min(by_share, cap)

    def _decide(
        self, document: dict[str, Any], node_name: str, at: datetime, fleet: int, held: frozenset[str]
    ) -> tuple[dict[str, Any] | None, Admission]:
        """The admission and the document to store (None: unchanged)."""
        moment = at.timestamp()
        level = self.settings.mode is BreakerMode.LEVEL
        horizon = moment - (ADMISSION_GRACE_SECONDS if level else self.settings.window_seconds)
        window = [entry for entry in document["window"] if float(entry["at"]) > horizon]
        known = {str(entry["node"]) for entry in window} | (held if level else set())
        if BreakerState(document["state"]) is BreakerState.TRIPPED:
            return None, Admission(False, BreakerState.TRIPPED, False, len(known), fleet, document["reason"])
        if node_name in known:
            return None, Admission(True, BreakerState.CLOSED, False, len(known), fleet)
        count = len(known) + 1
        limit = self.limit(fleet)
        if count > limit:
            reason = self._reason(node_name, count, fleet, limit)
            document.update(state=BreakerState.TRIPPED.value, window=window, tripped_at=_format(at), reason=reason)
            document.update(limit_nodes=limit, fleet_gpu_nodes=fleet, counted=count - 1)
            return document, Admission(False, BreakerState.TRIPPED, True, len(known), fleet, reason)
        window.append({"node": node_name, "at": moment})
        document.update(window=window, limit_nodes=limit, fleet_gpu_nodes=fleet, counted=count)
        return document, Admission(True, BreakerState.CLOSED, False, count, fleet)

    def _reason(self, node_name: str, count: int, fleet: int, limit: int) -> str:
        settings = self.settings
        what = (
            "out of service"
            if settings.mode is BreakerMode.LEVEL
            else f"in quarantine within {settings.window_seconds:g} s"
        )
        cap = settings.max_quarantined_nodes
        share = settings.max_quarantined_percent
        rule = f"{share:g}% of {fleet} = {allowed_nodes(fleet, share)}"
        bound = f"{limit} nodes ({rule}" + (f", capped at {cap})" if cap is not None else ")")
        return (
            f"quarantining {node_name} would put {count} of {fleet} GPU nodes ({100.0 * count / fleet:.1f}%)"
            f" {what}; the limit is {bound}"
        )

    def reset(self) -> dict[str, Any]:
        """Close the breaker and forget the window; returns the new document."""

        def close(stored: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
            document = _or_closed(stored)
            document.update(
                state=BreakerState.CLOSED.value,
                window=[],
                tripped_at=None,
                reason="",
                resets=int(document.get("resets", 0)) + 1,
            )
            return document, document

        return self.store.update_breaker(self.name, close)


def _or_closed(document: dict[str, Any] | None) -> dict[str, Any]:
    if document is None:
        return {"state": BreakerState.CLOSED.value, "window": [], "tripped_at": None, "reason": "", "resets": 0}
    return document


def allowed_nodes(fleet_size: int, max_percent: float) -> int:
    """Quarantines a window may hold: the percentage of the fleet, rounded down, but at least one."""
    return max(1, math.floor(fleet_size * max_percent / 100.0 + 1e-9))


def _format(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
