"""Kubernetes-object monitor: CEL policies over Node objects (conditions, labels, capacity) → events.

Why: some faults are visible only in the API — a node that went NotReady, a GPU the device
plugin stopped advertising, a condition set by node-problem-detector. As in NVSentinel's
kubernetes-object-monitor, a policy is a CEL predicate: true means unhealthy. This module is
pure: it is handed Node objects as plain dicts (from a watch in `dsx.kube`, or a test) and
remembers each (node, policy) verdict, sending an event only when it changes. The first
verdict for a node is always sent — a healthy one is the baseline that lets the pipeline
release a node that recovered while the monitor was down.

CEL variables: `node` (the Node object as a dict) and `now_seconds` (epoch seconds, a double).
Policies: `src/dsx/catalog/rules/kube_objects.yaml` (kind NodePolicies).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from dsx import catalog, cel
from dsx.errors import BadInputError
from dsx.model import health, schema
from dsx.model.health import HealthEvent, RecommendedAction

AGENT = "kubernetes-object-monitor"
API_VERSION = "dsx.health/v1alpha1"
KIND = "NodePolicies"
POLICIES_PARTS = ("rules", "kube_objects.yaml")
POLICIES_PATH = catalog.path(*POLICIES_PARTS)
VARIABLES = ("node", "now_seconds")
log = logging.getLogger("dsx.health.parsing.kube_objects")


@dataclass(frozen=True)
class NodePolicy:
    name: str
    description: str
    predicate: cel.Program
    event: HealthEvent
    """Template of the unhealthy event (node and time filled in)."""


class KubeObjectMonitor:
    """Evaluates node policies and reports verdict changes; one caller at a time (the node watch, or
    `dsx sentinel monitor kube`'s loop). `errors` is a bounded deque, safe to read from another thread."""

    agent = AGENT

    def __init__(self, policies: Sequence[NodePolicy], *, clock: Callable[[], float] = time.time) -> None:
        self.policies = tuple(policies)
        self._clock = clock
        self._verdicts: dict[tuple[str, str], bool] = {}
        self.errors: deque[str] = deque(maxlen=100)
        """Recent evaluation errors (a policy reading a field some node lacks), newest last."""

    def observe(self, node: Mapping[str, Any]) -> list[HealthEvent]:
        """Evaluate every policy on one Node object; events for the verdicts that changed."""
        name = _node_name(node)
        now = self._clock()
        bindings = {"node": node, "now_seconds": now}
        events: list[HealthEvent] = []
        for policy in self.policies:
            try:
                unhealthy = policy.predicate.test(bindings)
            except cel.CelEvaluationError as exc:
                self.errors.append(f"node {name}: policy {policy.name}: {exc}")
                continue
            key = (name, policy.name)
            if self._verdicts.get(key) == unhealthy:
                continue
            self._verdicts[key] = unhealthy
            events.append(_event(policy, name, unhealthy, datetime.fromtimestamp(now, UTC)))
        return events

    def forget(self, node_name: str) -> None:
        """The node was deleted: drop its verdicts (a node re-created later gets a new baseline)."""
        for key in [k for k in self._verdicts if k[0] == node_name]:
            del self._verdicts[key]


def _node_name(node: Mapping[str, Any]) -> str:
    metadata = node.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise BadInputError("Node object: metadata.name: missing")
    return name


def _event(policy: NodePolicy, node_name: str, unhealthy: bool, at: datetime) -> HealthEvent:
    template = policy.event
    if unhealthy:
        return dataclasses.replace(template, node_name=node_name, generated_at=at)
    return dataclasses.replace(
        template,
        node_name=node_name,
        generated_at=at,
        is_fatal=False,
        is_healthy=True,
        recommended_action=RecommendedAction.NONE,
        custom_recommended_action="",
        message=f"policy {policy.name} no longer matches",
    )


class PolicyDoc(schema.Section, frozen=True):
    """One policy as written (NodePolicies here, NodeEventPolicies in node_events.py)."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    predicate: str
    event: dict[str, Any]
    """HealthEvent fields of the unhealthy event (camelCase; old snake_case keys warned about)."""
    description: str = ""
    enabled: bool = True


class PoliciesDocument(schema.Section, frozen=True):
    """A policies file as written (camelCase keys; old snake_case keys read with a warning)."""

    api_version: str
    kind: str
    policies: list[PolicyDoc]


def shipped_policies() -> list[NodePolicy]:
    """The shipped policies; disabled ones left out (`dsx.files.health_files` reads a user's file)."""
    return policies_from_dict(catalog.mapping(*POLICIES_PARTS), source=str(POLICIES_PATH))


def policies_from_dict(data: Mapping[str, Any], *, source: str) -> list[NodePolicy]:
    policies = [
        (_policy(item, where), item.enabled) for item, where in policy_documents(data, source=source, kind=KIND)
    ]
    return [policy for policy, enabled in policies if enabled]


def policy_documents(data: Mapping[str, Any], *, source: str, kind: str) -> list[tuple[PolicyDoc, str]]:
    """The policies of a file of `kind`, each with where it is ("<file>: policies[i]"); names unique."""
    doc = schema.document(
        data, PoliciesDocument, api_version=API_VERSION, kind_name=kind, source=source, log=log, separator=": "
    )
    found: list[tuple[PolicyDoc, str]] = []
    names: set[str] = set()
    for index, item in enumerate(doc.policies):
        where = f"{source}: policies[{index}]"
        if item.name in names:
            raise BadInputError(f"{where}.name: {item.name!r} is used twice")
        names.add(item.name)
        found.append((item, where))
    return found


def _policy(doc: PolicyDoc, where: str) -> NodePolicy:
    metadata = doc.event.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise BadInputError(f"{where}.event.metadata: expected a mapping of strings to strings")
    schema.warn_renamed(log, f"{where}.event", health.old_keys(doc.event))
    template = HealthEvent.template(
        {**doc.event, "metadata": {**metadata, "policy": doc.name}}, agent=AGENT, source=f"{where}.event"
    )
    program = cel.compile_expression(doc.predicate, VARIABLES, origin=f"{where}.predicate")
    return NodePolicy(doc.name, doc.description, program, template)
