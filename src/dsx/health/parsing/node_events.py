"""Node events monitor: Kubernetes Events about Nodes (node-problem-detector's temporary problems) → health events.

node-problem-detector reports a *permanent* problem as a NodeCondition (read by the node
policies, `kube_objects.py`) and a *temporary* one as a core/v1 Event on the Node: reason the
rule's (`TaskHung`, `KernelOops`, `MemoryReadError`…), message the kernel line, type Warning,
`source.component` its monitor (`kernel-monitor`), `source.host` the node, in `--event-namespace`
(default `default`). A policy here is a CEL predicate over `event` (the Event as JSON): the first that
matches turns the Event into a HealthEvent for `involvedObject.name`, at the Event's last
timestamp. An Event that repeats is one object whose `count` grows: each new count is a new
time, hence a new health event; the same count seen again (a watch restarted) has the same
content, hence the same idempotency key, and is stored once. Events older than `since` (what
the watch's first list brings back) are left alone.

Pure: it is handed Event objects as dicts. Policies: `src/dsx/catalog/rules/node_events.yaml`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dsx import catalog, cel
from dsx.errors import BadInputError
from dsx.health.parsing import kube_objects
from dsx.model import health
from dsx.model.health import HealthEvent

AGENT = "node-event-monitor"
API_VERSION = kube_objects.API_VERSION
KIND = "NodeEventPolicies"
POLICIES_PARTS = ("rules", "node_events.yaml")
POLICIES_PATH = catalog.path(*POLICIES_PARTS)
VARIABLES = ("event",)
log = logging.getLogger("dsx.health.parsing.node_events")


@dataclass(frozen=True)
class EventPolicy:
    name: str
    description: str
    predicate: cel.Program
    event: HealthEvent
    """Template of the health event (node, time and message filled in)."""


class NodeEventMonitor:
    """Turns Node Events into health events by the first matching policy."""

    agent = AGENT

    def __init__(self, policies: Sequence[EventPolicy], *, since_epoch_seconds: float) -> None:
        self.policies = tuple(policies)
        self.since = since_epoch_seconds
        self.errors: deque[str] = deque(maxlen=100)
        """Recent evaluation errors, newest last."""

    def observe(self, event: Mapping[str, Any]) -> list[HealthEvent]:
        involved = event.get("involvedObject") or {}
        node = involved.get("name")
        if involved.get("kind") != "Node" or not isinstance(node, str) or not node:
            return []
        at = _last_seen(event)
        if at is None or at.timestamp() < self.since:
            return []
        for policy in self.policies:
            try:
                matched = policy.predicate.test({"event": dict(event)})
            except cel.CelEvaluationError as exc:
                self.errors.append(f"event {_name(event)}: policy {policy.name}: {exc}")
                continue
            if matched:
                return [_health_event(policy, event, node, at)]
        return []


def _health_event(policy: EventPolicy, event: Mapping[str, Any], node: str, at: datetime) -> HealthEvent:
    source = event.get("source") or {}
    reason = str(event.get("reason") or "")
    message = health.bounded_message(f"{reason}: {event.get('message') or ''}".strip())
    metadata = {
        **policy.event.metadata,
        "eventReason": reason,
        "eventSource": str(source.get("component") or event.get("reportingComponent") or ""),
        "eventCount": str(event.get("count") or (event.get("series") or {}).get("count") or 1),
    }
    return dataclasses.replace(policy.event, node_name=node, generated_at=at, message=message, metadata=metadata)


def _last_seen(event: Mapping[str, Any]) -> datetime | None:
    """When the Event last happened: lastTimestamp (core/v1), the series' last observation, eventTime."""
    candidates = (
        event.get("lastTimestamp"),
        (event.get("series") or {}).get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    )
    for text in candidates:
        if isinstance(text, str) and text:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                continue
            if moment.tzinfo is not None:
                return moment.replace(microsecond=0)
    return None


def _name(event: Mapping[str, Any]) -> str:
    metadata = event.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def shipped_policies() -> list[EventPolicy]:
    """The shipped policies (the NodePolicies schema; `predicate` over `event`); disabled ones left out."""
    return policies_from_dict(catalog.mapping(*POLICIES_PARTS), source=str(POLICIES_PATH))


def policies_from_dict(data: Mapping[str, Any], *, source: str) -> list[EventPolicy]:
    policies = []
    for item, where in kube_objects.policy_documents(data, source=source, kind=KIND):
        own = item.event.get("metadata") or {}
        if not isinstance(own, Mapping):
            raise BadInputError(f"{where}.event.metadata: expected a mapping of strings to strings")
        fields = {"message": "template", **item.event, "metadata": {**own, "policy": item.name}}
        template = HealthEvent.template(fields, agent=AGENT, source=f"{where}.event")
        program = cel.compile_expression(item.predicate, VARIABLES, origin=f"{where}.predicate")
        if item.enabled:
            policies.append(EventPolicy(item.name, item.description, program, template))
    return policies
