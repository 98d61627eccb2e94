"""A node's incident as the event history tells it: which faults are still open, and what fixes them.

Why derived from the store instead of kept beside it: NVSentinel kept fault state in node
annotations and condition message strings (a second database that drifted). Here the events
themselves are the record: walking a node's events since its incident began gives the open
faults, so a restarted sentinel, a replay and the live pipeline all reach the same answer.

Rules, in event order:
- a fatal, unhealthy event meant for remediation opens a fault keyed by (check, entities);
- a healthy event closes the faults of its check — those naming the same entities, or all of
  them when it names none;
- a `NodeRemediated` event (appended by the remediation stage) closes every fault before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dsx.health.decisions.eventstore import EventStore, StoredEvent
from dsx.model.health import (
    NODE_REMEDIATED_CHECK,
    EntityType,
    HealthEvent,
    ProcessingStrategy,
    RecommendedAction,
)

FaultKey = tuple[str, tuple[str, ...]]

_A = RecommendedAction
ACTION_RANK: Mapping[RecommendedAction, int] = {
    _A.NONE: 0,
    _A.COMPONENT_RESET: 1,
    _A.RESTART_VM: 2,
    _A.RESTART_BM: 3,
    _A.REPLACE_VM: 4,
    _A.RUN_DCGMEUD: 5,
    _A.RUN_FIELDDIAG: 6,
    _A.CUSTOM: 7,
    _A.UNKNOWN: 8,
    _A.CONTACT_SUPPORT: 9,
}
"""How far an action goes: a node's remediation answers its strongest open fault."""

GPU_ENTITY_TYPES = (EntityType.PCI, EntityType.GPU_UUID, EntityType.GPU)


def fault_key(event: HealthEvent) -> FaultKey:
    return event.check_name, tuple(sorted(f"{e.type.value}={e.value}" for e in event.entities))


def opens_fault(event: HealthEvent) -> bool:
    return (
        event.is_fatal
        and not event.is_healthy
        and event.processing_strategy is ProcessingStrategy.EXECUTE_REMEDIATION
        and event.check_name != NODE_REMEDIATED_CHECK
    )


def open_faults(events: Iterable[HealthEvent]) -> dict[FaultKey, HealthEvent]:
    """The faults still open after `events` (in order), each with the latest event that opened it."""
    found: dict[FaultKey, HealthEvent] = {}
    for event in events:
        if event.check_name == NODE_REMEDIATED_CHECK:
            found.clear()
        elif event.is_healthy:
            check, entities = fault_key(event)
            for key in [k for k in found if k[0] == check and (not entities or k[1] == entities)]:
                del found[key]
        elif opens_fault(event):
            found[fault_key(event)] = event
    return found


def node_events(store: EventStore, node_name: str, *, after_sequence: int, page: int = 1000) -> list[StoredEvent]:
    """The node's stored events past `after_sequence`, in order."""
    out: list[StoredEvent] = []
    while True:
        batch = store.events(after_sequence=after_sequence, node_name=node_name, limit=page)
        out.extend(batch)
        if len(batch) < page:
            return out
        after_sequence = batch[-1].sequence


def open_faults_since(store: EventStore, node_name: str, incident_sequence: int) -> dict[FaultKey, HealthEvent]:
    """Open faults of the incident that began with event `incident_sequence` (included)."""
    events = node_events(store, node_name, after_sequence=max(incident_sequence - 1, 0))
    return open_faults(stored.event for stored in events)


def strongest_action(faults: Iterable[HealthEvent]) -> RecommendedAction:
    return max((f.recommended_action for f in faults), key=ACTION_RANK.__getitem__, default=RecommendedAction.NONE)


def gpu_identifiers(faults: Iterable[HealthEvent]) -> tuple[str, ...]:
    """Every GPU the faults name (PCI address, UUID or index), lower-cased, sorted."""
    found = {value.lower() for f in faults for t in GPU_ENTITY_TYPES for value in f.entity_values(t)}
    return tuple(sorted(found))


def describe(faults: Mapping[FaultKey, HealthEvent]) -> str:
    """One line naming the open faults, e.g. 'KernelLogXid 79 (PCI=0000:38:00.0)'."""
    parts = []
    for (check, entities), event in sorted(faults.items()):
        codes = " ".join(event.error_codes)
        where = f" ({', '.join(entities)})" if entities else ""
        parts.append(f"{check}{' ' + codes if codes else ''}{where}")
    return "; ".join(parts) or "no open faults"
