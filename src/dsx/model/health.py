"""HealthEvent: the one record every monitor emits and every pipeline stage consumes.

Why a versioned model of its own: monitors (kernel log, NVML, nvidia-smi/DCGM reports,
Kubernetes objects, external posts) and stages (analyzer, quarantine, drain, remediation,
re-certification) never call each other; they meet only in the event store. The record is
therefore the contract, and it keeps the field set of NVSentinel's `HealthEvent` proto (agent,
component class, check name, fatality, action, error codes, entities, overrides, processing
strategy) so rules written for one read the same on the other. JSON keys are camelCase, as
everywhere in dsx (`isFatal`, `checkName`); bodies written before that (`is_fatal`) are still
read, and `old_keys` names their old keys so an ingestion door can warn. `schemaVersion` lets a
reader refuse a record written by a newer dsx.

The idempotency key is derived from the content (everything but the key itself), so a monitor
that re-sends an event after a crash produces the same key and the store keeps one copy. Its
input is the version-1 canonical form (`canonical_json`: snake_case keys, as dsx stored events
before the camelCase convention), which is also the stored document: keys and stored rows stay
what they were, whichever spelling a sender used.
Monitors that can see the same text twice as two real occurrences put the occurrence's source
position in `metadata` to keep the keys apart.

Also here: the node state machine the pipeline drives (`NodeState`, `TRANSITIONS`).
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from dsx import cel
from dsx.errors import BadInputError, ConflictError, allowed_values_message
from dsx.model import lazy, schema

SCHEMA_VERSION = 1

# What one event may carry, checked where events come in (dsx.health.parsing.ingest): the store, the
# sentinel's log lines, Kubernetes annotations and reports carry these strings on.
MAX_NODE_NAME_CHARS = 253
"""A Kubernetes node name: a DNS-1123 subdomain."""
MAX_NAME_CHARS = 253
"""agent, checkName, customRecommendedAction, an error code, an entity's type and value, a metadata key."""
MAX_MESSAGE_CHARS = 64 * 1024
"""The longest kernel-log line the monitor reads; a longer message is cut by `bounded_message`."""
MAX_METADATA_VALUE_CHARS = 4096
MAX_ITEMS = 64
"""Error codes, entities and metadata keys per event."""


def bounded_message(text: str) -> str:
    """`text` cut to `MAX_MESSAGE_CHARS`, saying how much was cut (a monitor's messages never exceed the bound)."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    marker = f" [cut: {len(text)} chars]"
    return text[: MAX_MESSAGE_CHARS - len(marker)] + marker


"""Version of the HealthEvent record; bump when a field changes meaning or becomes required."""


NODE_REMEDIATED_CHECK = "NodeRemediated"
"""check_name of the event the remediation stage appends (STORE_AND_ANALYSE, not fatal, not
healthy) each time it remediates a node, so the analyzer can count remediations per node."""


class RecommendedAction(enum.Enum):
    """What the emitter recommends; the numbers are the NVSentinel proto's, gaps included."""

    NONE = 0
    COMPONENT_RESET = 2
    CONTACT_SUPPORT = 5
    RUN_FIELDDIAG = 6
    RESTART_VM = 15
    RESTART_BM = 24
    REPLACE_VM = 25
    RUN_DCGMEUD = 26
    CUSTOM = 27
    UNKNOWN = 99


class ProcessingStrategy(enum.Enum):
    """How far down the pipeline an event travels."""

    EXECUTE_REMEDIATION = "EXECUTE_REMEDIATION"
    """Normal: stored, analysed, and may quarantine, drain and remediate."""
    STORE_AND_ANALYSE = "STORE_AND_ANALYSE"
    """Stored and seen by the analyzer (e.g. a repeat inside a dedup window), but acts on nothing."""
    STORE_ONLY = "STORE_ONLY"
    """Stored for the record only."""


class ComponentClass(enum.Enum):
    """The kind of part an event is about."""

    GPU = "GPU"
    NVSWITCH = "NVSWITCH"
    NIC = "NIC"
    NODE = "NODE"
    INSTANCE = "INSTANCE"
    """A cloud instance as a whole (maintenance notices)."""


class EntityType(enum.Enum):
    """The kinds of impacted entity an event can name."""

    GPU = "GPU"
    """GPU index on the node as NVML enumerates it, e.g. "0"."""
    GPU_UUID = "GPU_UUID"
    """e.g. "GPU-2b6e9f4a-..."."""
    PCI = "PCI"
    """PCI address in canonical lower-case form domain:bus:device.function, e.g. "0000:3b:00.0"."""
    NVLINK = "NVLINK"
    """NVLink index on its GPU, e.g. "4"."""
    NVSWITCH = "NVSWITCH"
    NIC = "NIC"
    """NIC device name, e.g. "mlx5_0"."""
    NIC_PORT = "NIC_PORT"
    """NIC port, e.g. "mlx5_0/1"."""
    GPC = "GPC"
    TPC = "TPC"
    SM = "SM"
    POD = "POD"
    """namespace/name of an affected pod."""
    INSTANCE = "INSTANCE"
    """Cloud instance id."""


class Entity(schema.Section, frozen=True, kw_only=False, order=True):
    """One impacted part: a type and its identifying value (its own schema in an event's `entities`)."""

    type: EntityType
    value: Annotated[str, msgspec.Meta(min_length=1)]

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type.value, "value": self.value}


class BehaviourOverrides(schema.Section, frozen=True):
    """Per-event override of one stage: `force` acts without a rule match, `skip` bypasses the stage."""

    force: bool = False
    skip: bool = False

    def to_dict(self) -> dict[str, bool]:
        return {"force": self.force, "skip": self.skip}


NO_OVERRIDES = BehaviourOverrides()


@dataclass(frozen=True)
class HealthEvent:
    """One observation about one node's health, as emitted by a monitor.

    Field order is the JSON order. `generated_at` is when the monitor saw the fault (UTC);
    the store adds its own receive time and sequence number.
    """

    agent: str
    """The emitting monitor or stage, e.g. "kernel-log-monitor", "health-events-analyzer"."""
    component_class: ComponentClass
    check_name: str
    """A stable name for the check, e.g. "KernelLogXid", "GpuRemappedRows"; also the node-condition type."""
    node_name: str
    generated_at: datetime
    is_fatal: bool
    """A fatal event may quarantine the node; a non-fatal one is recorded and analysed."""
    is_healthy: bool
    """True reports recovery (or a healthy baseline) of the named entities."""
    message: str
    recommended_action: RecommendedAction = RecommendedAction.NONE
    custom_recommended_action: str = ""
    """Free-form action name, used only with RecommendedAction.CUSTOM."""
    error_codes: tuple[str, ...] = ()
    """Bare codes: "79", "145.RLW_SRC_TRACK", "DCGM_FR_ROW_REMAP_FAILURE", "NODE_NOT_READY"."""
    entities: tuple[Entity, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Free-form string pairs; treat as read-only (the key is computed once and cached)."""
    processing_strategy: ProcessingStrategy = ProcessingStrategy.EXECUTE_REMEDIATION
    quarantine_overrides: BehaviourOverrides = NO_OVERRIDES
    drain_overrides: BehaviourOverrides = NO_OVERRIDES
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.generated_at.tzinfo is None:
            raise BadInputError(f"HealthEvent: generated_at {self.generated_at.isoformat()} has no time zone")
        problem = _invariant_problem(
            self.is_fatal, self.is_healthy, self.recommended_action, self.custom_recommended_action
        )
        if problem:
            raise BadInputError(f"HealthEvent: {problem}")

    @lazy.cached_property
    def canonical_json(self) -> str:
        """The version-1 record (snake_case keys) as compact ASCII JSON with sorted keys: the stored
        form and the key's input, unchanged by the camelCase wire spelling so keys stay stable."""
        stored = dict(zip(_STORED_NAMES[:-1], self._values(), strict=True))  # all but the key
        return json.dumps(stored, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    @lazy.cached_property
    def idempotency_key(self) -> str:
        """`sha256:` + hex digest of `canonical_json`: same content, same key, one stored copy."""
        return "sha256:" + hashlib.sha256(self.canonical_json.encode("ascii")).hexdigest()

    def entity_values(self, entity_type: EntityType) -> tuple[str, ...]:
        """Values of the impacted entities of one type, in event order."""
        return tuple(e.value for e in self.entities if e.type is entity_type)

    def content(self) -> dict[str, Any]:
        """The JSON-ready record without its key, camelCase: what CEL rules see as `event`."""
        return dict(zip(_FIELDS[:-1], self._values(), strict=True))  # all but the key

    def _values(self) -> tuple[Any, ...]:
        """The JSON values of every field but the key, in `_FIELDS` order (one list for both spellings)."""
        return (
            self.schema_version,
            self.agent,
            self.component_class.value,
            self.check_name,
            self.node_name,
            format_timestamp(self.generated_at),
            self.is_fatal,
            self.is_healthy,
            self.message,
            self.recommended_action.name,
            self.custom_recommended_action,
            list(self.error_codes),
            [e.to_dict() for e in self.entities],
            dict(sorted(self.metadata.items())),
            self.processing_strategy.value,
            self.quarantine_overrides.to_dict(),
            self.drain_overrides.to_dict(),
        )

    def to_dict(self) -> dict[str, Any]:
        """`content()` plus the idempotency key (`from_dict` checks a key it is given against the content)."""
        return {**self.content(), "idempotencyKey": self.idempotency_key}

    @classmethod
    def template(cls, fields: Mapping[str, Any], *, agent: str, source: str) -> HealthEvent:
        """An unhealthy event from the fields a rule file gives (validated like `from_dict`).

        Node and time are placeholders (`template`, the epoch) for the caller to replace with
        `dataclasses.replace` each time the rule produces an event.
        """
        defaults = {
            "agent": agent,
            "nodeName": "template",
            "generatedAt": "1970-01-01T00:00:00Z",
            "isHealthy": False,
        }
        return cls.from_dict({**defaults, **_current(fields)}, source=source)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "HealthEvent") -> HealthEvent:
        """Parse and validate; every error names `source` and the field. Unknown fields are refused.

        Old snake_case keys are read silently (stored rows, old senders); `old_keys` names them.
        """
        if not isinstance(data, Mapping):
            raise BadInputError(f"{source}: expected a mapping, got {type(data).__name__}")
        return _parse_event(_current(data), source)


def old_keys(data: object) -> list[tuple[str, str]]:
    """The (old snake_case key, camelCase key) pairs a HealthEvent body uses, for a warning."""
    if not isinstance(data, Mapping):
        return []
    return [(key, _CAMEL[key]) for key in data if key in _CAMEL and _CAMEL[key] not in data]


def _current(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data` with old snake_case keys under their camelCase names (a key given in both spellings
    keeps its old one, which `_parse_event` then refuses as unknown)."""
    current = {_CAMEL.get(key, key): value for key, value in data.items()}
    if len(current) == len(data):
        return current
    return {_CAMEL[key] if key in _CAMEL and _CAMEL[key] not in data else key: value for key, value in data.items()}


_OLD_EXPRESSION_FIELD = re.compile(r"\bevent\.([a-z]+(?:_[a-z]+)+)\b")


def camel_expression(expression: str) -> tuple[str, list[tuple[str, str]]]:
    """A CEL expression over `event` with old field names (`event.is_fatal`) in camelCase, and the
    (old, new) pairs it rewrote, so rule files written before the convention keep working."""
    found: list[tuple[str, str]] = []

    def rename(match: re.Match[str]) -> str:
        name = _CAMEL.get(match.group(1))
        if name is None:
            return match.group(0)
        found.append((f"event.{match.group(1)}", f"event.{name}"))
        return f"event.{name}"

    return _OLD_EXPRESSION_FIELD.sub(rename, expression), found


def event_rule(source: str, variables: Iterable[str], *, where: str, log: logging.Logger) -> cel.Program:
    """A CEL rule over `event` (camelCase fields); old names (`event.is_fatal`) are read and warned about."""
    current, old_names = camel_expression(source)
    for old, new in old_names:
        log.warning("%s: %s: old snake_case field, read as %s; rename it (keys are camelCase)", where, old, new)
    return cel.compile_expression(current, variables, origin=where)


def _invariant_problem(is_fatal: bool, is_healthy: bool, action: RecommendedAction, custom_action: str) -> str:
    if is_healthy and is_fatal:
        return "isFatal and isHealthy are both true"
    if (action is RecommendedAction.CUSTOM) != bool(custom_action):
        return "customRecommendedAction is required with recommendedAction CUSTOM and only then"
    return ""


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds and a `Z`: one spelling, so keys and bytes are stable."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: object, *, source: str, field_name: str) -> datetime:
    """An RFC 3339 timestamp with a zone, as a UTC datetime."""
    if not isinstance(text, str):
        raise BadInputError(f"{source}: {field_name}: expected an RFC 3339 timestamp string, got {text!r}")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadInputError(f"{source}: {field_name}: {text!r} is not an RFC 3339 timestamp") from exc
    if moment.tzinfo is None:
        raise BadInputError(f"{source}: {field_name}: {text!r} has no time zone (append Z for UTC)")
    return moment.astimezone(UTC)


_FIELDS = (
    "schemaVersion",
    "agent",
    "componentClass",
    "checkName",
    "nodeName",
    "generatedAt",
    "isFatal",
    "isHealthy",
    "message",
    "recommendedAction",
    "customRecommendedAction",
    "errorCodes",
    "entities",
    "metadata",
    "processingStrategy",
    "quarantineOverrides",
    "drainOverrides",
    "idempotencyKey",
)
_STORED_NAMES = tuple(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name) for name in _FIELDS)
"""The version-1 snake_case spelling of each field (the stored form and the key's input)."""
_CAMEL = {old: new for new, old in zip(_FIELDS, _STORED_NAMES, strict=True) if old != new}
"""Old snake_case key → camelCase field."""


class _EventDoc(schema.Section, frozen=True):
    """The wire form, decoded by msgspec: types, enums, unknown and missing keys. The rest
    (blank names, the action's name, the timestamp's zone, fatal-and-healthy, the key) is
    checked after decoding, where a schema cannot say it."""

    agent: str
    component_class: ComponentClass
    check_name: str
    node_name: str
    generated_at: str
    is_fatal: bool
    is_healthy: bool
    message: str = ""
    recommended_action: str = RecommendedAction.NONE.name
    custom_recommended_action: str = ""
    error_codes: tuple[Annotated[str, msgspec.Meta(min_length=1)], ...] = ()
    entities: tuple[Entity, ...] = ()
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    processing_strategy: ProcessingStrategy = ProcessingStrategy.EXECUTE_REMEDIATION
    quarantine_overrides: BehaviourOverrides = NO_OVERRIDES
    drain_overrides: BehaviourOverrides = NO_OVERRIDES
    schema_version: Annotated[int, msgspec.Meta(ge=1, le=SCHEMA_VERSION)] = SCHEMA_VERSION
    idempotency_key: str | None = None


def _parse_event(data: Mapping[str, Any], source: str) -> HealthEvent:
    doc = schema.decode(data, _EventDoc, source=source, separator=": ")
    for name, value in (("agent", doc.agent), ("checkName", doc.check_name), ("nodeName", doc.node_name)):
        if not value.strip():
            raise BadInputError(f"{source}: {name}: must not be empty")
    action = RecommendedAction.__members__.get(doc.recommended_action)
    if action is None:
        allowed = list(RecommendedAction.__members__)
        raise BadInputError(allowed_values_message(source, "recommendedAction", doc.recommended_action, allowed))
    problem = _invariant_problem(doc.is_fatal, doc.is_healthy, action, doc.custom_recommended_action)
    if problem:
        raise BadInputError(f"{source}: {problem}")
    event = HealthEvent(
        schema_version=doc.schema_version,
        agent=doc.agent,
        component_class=doc.component_class,
        check_name=doc.check_name,
        node_name=doc.node_name,
        generated_at=parse_timestamp(doc.generated_at, source=source, field_name="generatedAt"),
        is_fatal=doc.is_fatal,
        is_healthy=doc.is_healthy,
        message=doc.message,
        recommended_action=action,
        custom_recommended_action=doc.custom_recommended_action,
        error_codes=doc.error_codes,
        entities=doc.entities,
        metadata=doc.metadata,
        processing_strategy=doc.processing_strategy,
        quarantine_overrides=doc.quarantine_overrides,
        drain_overrides=doc.drain_overrides,
    )
    if doc.idempotency_key is not None and doc.idempotency_key != event.idempotency_key:
        raise BadInputError(
            f"{source}: idempotencyKey {doc.idempotency_key!r} does not match the content ({event.idempotency_key});"
            " leave it out to have it derived"
        )
    return event


class NodeState(enum.Enum):
    """Where a node stands in the operate pipeline (kept in the store, shown by `dsx sentinel status`)."""

    HEALTHY = "healthy"
    QUARANTINED = "quarantined"
    DRAINING = "draining"
    DRAINED = "drained"
    REMEDIATING = "remediating"
    RECERTIFYING = "recertifying"
    FAILED = "failed"
    """Needs a human: remediation unsupported or failed, or re-certification failed."""


_S = NodeState
TRANSITIONS: Mapping[NodeState, frozenset[NodeState]] = {
    # a new node or a changed recipe goes straight to re-certification; a fault quarantines
    _S.HEALTHY: frozenset({_S.QUARANTINED, _S.RECERTIFYING}),
    # recovery or a manual uncordon returns to healthy before any drain
    _S.QUARANTINED: frozenset({_S.DRAINING, _S.RECERTIFYING, _S.HEALTHY, _S.FAILED}),
    _S.DRAINING: frozenset({_S.DRAINED, _S.HEALTHY, _S.FAILED}),
    # entities that recovered on their own skip remediation and go to re-certification
    _S.DRAINED: frozenset({_S.REMEDIATING, _S.RECERTIFYING, _S.HEALTHY, _S.FAILED}),
    _S.REMEDIATING: frozenset({_S.RECERTIFYING, _S.FAILED}),
    # a failed re-certification keeps the node out of service (quarantined again, or failed)
    _S.RECERTIFYING: frozenset({_S.HEALTHY, _S.QUARANTINED, _S.FAILED}),
    # a human may retry remediation or re-certification, or clear the node
    _S.FAILED: frozenset({_S.QUARANTINED, _S.REMEDIATING, _S.RECERTIFYING, _S.HEALTHY}),
}
"""Allowed moves; staying in the same state is always allowed (a replayed action)."""


def transition_allowed(current: NodeState, target: NodeState) -> bool:
    return current is target or target in TRANSITIONS[current]


def require_transition(node_name: str, current: NodeState, target: NodeState) -> None:
    """Raise ConflictError when `current → target` is not in TRANSITIONS."""
    if not transition_allowed(current, target):
        allowed = sorted(s.value for s in TRANSITIONS[current])
        raise ConflictError(
            f"node {node_name}: cannot move from {current.value} to {target.value}; allowed: {', '.join(allowed)}"
        )
