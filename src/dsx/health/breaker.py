"""Circuit breaker: stop quarantining when too much of the fleet went into quarantine at once.

Why: a monitor bug, a bad driver rollout or a fabric-wide event can make every node look
faulty; cordoning them all would take the cluster down in the name of health. Before each new
quarantine the breaker counts the distinct nodes whose quarantine began within
`window_seconds` (this one included); if that is more than `max_quarantined_percent` of the
GPU nodes (rounded down, but never less than one node, so a small fleet can still quarantine
its first faulty node), it trips and refuses this and every later quarantine until a person resets it
(`dsx sentinel breaker reset`). A reset also forgets the window, so the events refused while
it was open are not replayed (NVSentinel #450).

The state is a document in the event store (`save_breaker`), so a restart keeps a tripped
breaker tripped. Times are the events' store times, so a replay trips where the live run did.
"""

from __future__ import annotations

import enum
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dsx.health.eventstore import EventStore
from dsx.health.policy import BreakerSettings

NAME = "quarantine"


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
    """One breaker persisted under `name` in the store; thread-safe within the process."""

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
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        document = self.store.load_breaker(self.name)
        if document is None:
            return {"state": BreakerState.CLOSED.value, "window": [], "tripped_at": None, "reason": "", "resets": 0}
        return document

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
        with self._lock:
            document = self._load()
            moment = at.timestamp()
            horizon = moment - self.settings.window_seconds
            window = [entry for entry in document["window"] if float(entry["at"]) > horizon]
            known = {str(entry["node"]) for entry in window}
            fleet = max(self._fleet_size(), 1)
            if BreakerState(document["state"]) is BreakerState.TRIPPED:
                return Admission(False, BreakerState.TRIPPED, False, len(known), fleet, document["reason"])
            if node_name in known:
                return Admission(True, BreakerState.CLOSED, False, len(known), fleet)
            count = len(known) + 1
            percent = 100.0 * count / fleet
            if count > allowed_nodes(fleet, self.settings.max_quarantined_percent):
                reason = (
                    f"quarantining {node_name} would put {count} of {fleet} GPU nodes ({percent:.1f}%) in quarantine"
                    f" within {self.settings.window_seconds:g} s; the limit is"
                    f" {self.settings.max_quarantined_percent:g}%"
                )
                document.update(state=BreakerState.TRIPPED.value, window=window, tripped_at=_format(at), reason=reason)
                self.store.save_breaker(self.name, document)
                return Admission(False, BreakerState.TRIPPED, True, len(known), fleet, reason)
            window.append({"node": node_name, "at": moment})
            document["window"] = window
            self.store.save_breaker(self.name, document)
            return Admission(True, BreakerState.CLOSED, False, count, fleet)

    def reset(self) -> dict[str, Any]:
        """Close the breaker and forget the window; returns the new document."""
        with self._lock:
            document = self._load()
            document.update(
                state=BreakerState.CLOSED.value,
                window=[],
                tripped_at=None,
                reason="",
                resets=int(document.get("resets", 0)) + 1,
            )
            self.store.save_breaker(self.name, document)
            return document


def allowed_nodes(fleet_size: int, max_percent: float) -> int:
    """Quarantines a window may hold: the percentage of the fleet, rounded down, but at least one."""
    return max(1, math.floor(fleet_size * max_percent / 100.0 + 1e-9))


def _format(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
