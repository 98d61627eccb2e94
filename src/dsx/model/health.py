"""HealthEvent: the one record every monitor emits and every pipeline stage consumes.

Why a versioned model of its own: monitors (kernel log, NVML, nvidia-smi/DCGM reports,
Kubernetes objects, external posts) and stages (analyzer, quarantine, drain, remediation,
re-certification) never call each other; they meet only in the event store. The record is
therefore the contract, and it keeps the field set of NVSentinel's `HealthEvent` proto (agent,
component class, check name, fatality, action, error codes, entities, overrides, processing
strategy) so rules written for one read the same on the other. JSON keys are snake_case;
`schema_version` lets a reader refuse a record written by a newer dsx.

The idempotency key is derived from the content (everything but the key itself), so a monitor
that re-sends an event after a crash produces the same key and the store keeps one copy.
Monitors that can see the same text twice as two real occurrences put the occurrence's source
position in `metadata` to keep the keys apart.

Also here: the node state machine the pipeline drives (`NodeState`, `TRANSITIONS`).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from dsx.errors import BadInputError, ConflictError, allowed_values_message

SCHEMA_VERSION = 1
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


@dataclass(frozen=True, order=True)
class Entity:
    """One impacted part: a type and its identifying value."""

    type: EntityType
    value: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type.value, "value": self.value}


@dataclass(frozen=True)
class BehaviourOverrides:
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

    @functools.cached_property
    def canonical_json(self) -> str:
        """`content()` as compact ASCII JSON with sorted keys: the stored form and the key's input."""
        return json.dumps(self.content(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    @functools.cached_property
    def idempotency_key(self) -> str:
        """`sha256:` + hex digest of `canonical_json`: same content, same key, one stored copy."""
        return "sha256:" + hashlib.sha256(self.canonical_json.encode("ascii")).hexdigest()

    def entity_values(self, entity_type: EntityType) -> tuple[str, ...]:
        """Values of the impacted entities of one type, in event order."""
        return tuple(e.value for e in self.entities if e.type is entity_type)

    def content(self) -> dict[str, Any]:
        """The JSON-ready record without its key: what the key is derived from (and what CEL rules see)."""
        return {
            "schema_version": self.schema_version,
            "agent": self.agent,
            "component_class": self.component_class.value,
            "check_name": self.check_name,
            "node_name": self.node_name,
            "generated_at": format_timestamp(self.generated_at),
            "is_fatal": self.is_fatal,
            "is_healthy": self.is_healthy,
            "message": self.message,
            "recommended_action": self.recommended_action.name,
            "custom_recommended_action": self.custom_recommended_action,
            "error_codes": list(self.error_codes),
            "entities": [e.to_dict() for e in self.entities],
            "metadata": dict(sorted(self.metadata.items())),
            "processing_strategy": self.processing_strategy.value,
            "quarantine_overrides": self.quarantine_overrides.to_dict(),
            "drain_overrides": self.drain_overrides.to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        """`content()` plus the idempotency key (`from_dict` checks a key it is given against the content)."""
        return {**self.content(), "idempotency_key": self.idempotency_key}

    @classmethod
    def template(cls, fields: Mapping[str, Any], *, agent: str, source: str) -> HealthEvent:
        """An unhealthy event from the fields a rule file gives (validated like `from_dict`).

        Node and time are placeholders (`template`, the epoch) for the caller to replace with
        `dataclasses.replace` each time the rule produces an event.
        """
        defaults = {
            "agent": agent,
            "node_name": "template",
            "generated_at": "1970-01-01T00:00:00Z",
            "is_healthy": False,
        }
        return cls.from_dict({**defaults, **fields}, source=source)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "HealthEvent") -> HealthEvent:
        """Parse and validate; every error names `source` and the field. Unknown fields are refused."""
        return _parse_event(data, source)


def _invariant_problem(is_fatal: bool, is_healthy: bool, action: RecommendedAction, custom_action: str) -> str:
    if is_healthy and is_fatal:
        return "is_fatal and is_healthy are both true"
    if (action is RecommendedAction.CUSTOM) != bool(custom_action):
        return "custom_recommended_action is required with recommended_action CUSTOM and only then"
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


_E = TypeVar("_E", bound=enum.Enum)

_FIELDS = (
    "schema_version",
    "agent",
    "component_class",
    "check_name",
    "node_name",
    "generated_at",
    "is_fatal",
    "is_healthy",
    "message",
    "recommended_action",
    "custom_recommended_action",
    "error_codes",
    "entities",
    "metadata",
    "processing_strategy",
    "quarantine_overrides",
    "drain_overrides",
    "idempotency_key",
)
_REQUIRED = ("agent", "component_class", "check_name", "node_name", "generated_at", "is_fatal", "is_healthy")


def _parse_event(data: Mapping[str, Any], source: str) -> HealthEvent:
    if not isinstance(data, Mapping):
        raise BadInputError(f"{source}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise BadInputError(allowed_values_message(source, "field", unknown[0], _FIELDS))
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise BadInputError(f"{source}: missing required field {missing[0]}")
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        raise BadInputError(allowed_values_message(source, "schema_version", version, range(1, SCHEMA_VERSION + 1)))
    is_fatal, is_healthy = _flag(data, "is_fatal", source), _flag(data, "is_healthy", source)
    action = _member(
        RecommendedAction, data.get("recommended_action", "NONE"), source, "recommended_action", by_value=False
    )
    custom_action = _text(data, "custom_recommended_action", source)
    problem = _invariant_problem(is_fatal, is_healthy, action, custom_action)
    if problem:
        raise BadInputError(f"{source}: {problem}")
    event = HealthEvent(
        schema_version=version,
        agent=_text(data, "agent", source, required=True),
        component_class=_member(ComponentClass, data["component_class"], source, "component_class", by_value=True),
        check_name=_text(data, "check_name", source, required=True),
        node_name=_text(data, "node_name", source, required=True),
        generated_at=parse_timestamp(data["generated_at"], source=source, field_name="generated_at"),
        is_fatal=is_fatal,
        is_healthy=is_healthy,
        message=_text(data, "message", source),
        recommended_action=action,
        custom_recommended_action=custom_action,
        error_codes=tuple(_texts(data.get("error_codes", []), source, "error_codes")),
        entities=tuple(_entities(data.get("entities", []), source)),
        metadata=_metadata(data.get("metadata", {}), source),
        processing_strategy=_member(
            ProcessingStrategy,
            data.get("processing_strategy", ProcessingStrategy.EXECUTE_REMEDIATION.value),
            source,
            "processing_strategy",
            by_value=True,
        ),
        quarantine_overrides=_overrides(data.get("quarantine_overrides", {}), source, "quarantine_overrides"),
        drain_overrides=_overrides(data.get("drain_overrides", {}), source, "drain_overrides"),
    )
    claimed = data.get("idempotency_key")
    if claimed is not None and claimed != event.idempotency_key:
        raise BadInputError(
            f"{source}: idempotency_key {claimed!r} does not match the content ({event.idempotency_key});"
            " leave it out to have it derived"
        )
    return event


def _text(data: Mapping[str, Any], name: str, source: str, *, required: bool = False) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        raise BadInputError(f"{source}: {name}: expected a string, got {type(value).__name__}")
    if required and not value.strip():
        raise BadInputError(f"{source}: {name}: must not be empty")
    return value


def _flag(data: Mapping[str, Any], name: str, source: str) -> bool:
    value = data[name]
    if not isinstance(value, bool):
        raise BadInputError(f"{source}: {name}: expected true or false, got {value!r}")
    return value


def _texts(value: object, source: str, name: str) -> list[str]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise BadInputError(f"{source}: {name}: expected a list of strings")
    out: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise BadInputError(f"{source}: {name}[{index}]: expected a non-empty string, got {item!r}")
        out.append(item)
    return out


def _member(kind: type[_E], value: object, source: str, name: str, *, by_value: bool) -> _E:
    lookup: Mapping[Any, _E] = kind._value2member_map_ if by_value else kind.__members__  # type: ignore[assignment]
    try:
        found = lookup.get(value) if isinstance(value, str) else None
    except TypeError:  # an unhashable value is no member either
        found = None
    if found is not None:
        return found
    allowed = [m.value if by_value else m.name for m in kind]
    raise BadInputError(allowed_values_message(source, name, value, allowed))


def _entities(value: object, source: str) -> list[Entity]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise BadInputError(f"{source}: entities: expected a list of {{type, value}} mappings")
    out: list[Entity] = []
    for index, item in enumerate(value):
        where = f"entities[{index}]"
        if not isinstance(item, Mapping) or set(item) != {"type", "value"}:
            raise BadInputError(f"{source}: {where}: expected a mapping with exactly the keys type and value")
        entity_value = item["value"]
        if not isinstance(entity_value, str) or not entity_value:
            raise BadInputError(f"{source}: {where}.value: expected a non-empty string")
        out.append(Entity(_member(EntityType, item["type"], source, f"{where}.type", by_value=True), entity_value))
    return out


def _metadata(value: object, source: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise BadInputError(f"{source}: metadata: expected a mapping of strings to strings")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise BadInputError(f"{source}: metadata.{key}: expected a string value, got {item!r}")
    return dict(value)


def _overrides(value: object, source: str, name: str) -> BehaviourOverrides:
    if not isinstance(value, Mapping) or not set(value) <= {"force", "skip"}:
        raise BadInputError(f"{source}: {name}: expected a mapping with the optional keys force and skip")
    for key, item in value.items():
        if not isinstance(item, bool):
            raise BadInputError(f"{source}: {name}.{key}: expected true or false, got {item!r}")
    return BehaviourOverrides(force=value.get("force", False), skip=value.get("skip", False))


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
