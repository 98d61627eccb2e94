"""Health-events analyzer: windowed correlation rules kept as data, with CEL conditions.

Why not database queries: NVSentinel's analyzer runs MongoDB aggregation pipelines per event
(3,685 lines of them in its chart), which could not move to PostgreSQL, scanned whole
collections (~4.9 s per rule on one fleet) and saturated near 55 events/s. Here a rule is a
few plain fields — the `checkNames` it looks at, a CEL `match` over the event, the
`groupBy` keys that make two events "the same" (node, GPU, error code, …), a
`windowSeconds` and a `threshold` — and the analyzer keeps one sorted deque of event times
per (rule, group) in memory. Each event costs a set lookup per rule, one CEL evaluation per
rule whose check names it carries, and amortised O(1) deque work, independent of history size.

Semantics:
- Time is the event's `generatedAt`, so replaying stored history gives the same answers.
- When a group reaches `threshold` events within `windowSeconds`, the rule fires once and
  the group's window starts empty again (the next firing needs `threshold` new events).
- The derived event copies the triggering event's node, entities and time, names the rule as
  `checkName` and records the trigger's key in `metadata`, so re-processing the same trigger
  after a crash derives the same event (same idempotency key: stored once).
- The analyzer never counts its own events (NVSentinel's self-trigger bug, upstream #1704),
  nor STORE_ONLY ones. An event without a value for a group key is not counted by that rule.
- `warm` rebuilds the windows from stored history without emitting, so a restart neither
  forgets recent events nor fires twice.
- A step retried after a store error (append or ack failed, before or after committing) counts
  nothing twice: an event is counted once per process and what it fired is kept until the
  store acknowledged it, so the retry re-sends the same derived events (same keys).

Rules file: `src/dsx/catalog/rules/analyzer.yaml` (kind AnalyzerRules); see docs/health-events.md.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from dsx import catalog, cel
from dsx.errors import BadInputError, allowed_values_message
from dsx.model import health, schema
from dsx.model.health import EntityType, HealthEvent, ProcessingStrategy

log = logging.getLogger("dsx.health.decisions.analyzer")

AGENT = "health-events-analyzer"
API_VERSION = "dsx.health/v1alpha1"
KIND = "AnalyzerRules"
RULES_PARTS = ("rules", "analyzer.yaml")
RULES_PATH = catalog.path(*RULES_PARTS)
PURGE_EVERY_EVENTS = 10_000
"""How often idle groups are dropped; bounds memory on a fleet that reports every code."""


def _gpu(event: HealthEvent) -> tuple[str, ...]:
    """One identity per GPU whichever monitor saw it: PCI address, else UUID, else index."""
    for entity_type in (EntityType.PCI, EntityType.GPU_UUID, EntityType.GPU):
        values = event.entity_values(entity_type)
        if values:
            return values[:1]
    return ()


GROUP_KEYS: Mapping[str, Callable[[HealthEvent], tuple[str, ...]]] = {
    "node": lambda e: (e.node_name,),
    "agent": lambda e: (e.agent,),
    "check_name": lambda e: (e.check_name,),
    "component_class": lambda e: (e.component_class.value,),
    "gpu": _gpu,
    "error_code": lambda e: e.error_codes,
    "nvlink": lambda e: e.entity_values(EntityType.NVLINK),
    "nvswitch": lambda e: e.entity_values(EntityType.NVSWITCH),
    "nic": lambda e: e.entity_values(EntityType.NIC) + e.entity_values(EntityType.NIC_PORT),
}
"""What `groupBy` may name; a key with several values (two error codes) counts in each group."""


@dataclass(frozen=True)
class AnalyzerRule:
    name: str
    description: str
    check_names: frozenset[str]
    """Only events with one of these check names are considered (empty: all); a cheap index before CEL."""
    match: cel.Program
    group_by: tuple[str, ...]
    window_seconds: float
    threshold: int
    emit: HealthEvent
    """Template of the derived event (node, time, entities and codes are filled in per firing)."""

    def groups(self, event: HealthEvent) -> list[tuple[str, ...]]:
        """The group keys this event counts in (empty when a key has no value)."""
        keys: list[tuple[str, ...]] = [()]
        for name in self.group_by:
            values = GROUP_KEYS[name](event)
            keys = [(*key, value) for key in keys for value in values]
        return keys


class Analyzer:
    """Sliding-window counters for a set of rules.

    One caller at a time: the analyzer's consumer loop (`dsx.pipeline.analyzer_stage`), which warms it
    before its thread starts. The domain holds no locks; the runtime serialises.
    """

    def __init__(self, rules: Sequence[AnalyzerRule]) -> None:
        self.rules = tuple(rules)
        self._windows: dict[tuple[int, tuple[str, ...]], deque[float]] = {}
        self._seen = 0
        self._newest = 0.0

    def observe(self, event: HealthEvent) -> list[HealthEvent]:
        """Count one event; returns the events of the rules it made fire."""
        return self._count(event, emit=True)

    def warm(self, events: Iterable[HealthEvent]) -> None:
        """Count history without emitting (after a restart)."""
        for event in events:
            self._count(event, emit=False)

    def group_count(self) -> int:
        return len(self._windows)

    def _count(self, event: HealthEvent, *, emit: bool) -> list[HealthEvent]:
        if event.agent == AGENT or event.processing_strategy is ProcessingStrategy.STORE_ONLY:
            return []
        moment = event.generated_at.timestamp()
        bindings: dict[str, Any] | None = None
        fired: list[HealthEvent] = []
        self._seen += 1
        self._newest = max(self._newest, moment)
        for index, rule in enumerate(self.rules):
            if rule.check_names and event.check_name not in rule.check_names:
                continue
            groups = rule.groups(event)
            if not groups:
                continue
            bindings = bindings or {"event": event.content()}
            if not rule.match.test(bindings):
                continue
            for group in groups:
                window = self._windows.setdefault((index, group), deque())
                _slide(window, moment, rule.window_seconds)
                if len(window) >= rule.threshold:
                    window.clear()
                    if emit:
                        fired.append(_derived(rule, group, event))
        if self._seen % PURGE_EVERY_EVENTS == 0:
            self._purge()
        return fired

    def _purge(self) -> None:
        """Drop groups whose newest event left the window (relative to the newest event seen)."""
        idle = [
            key
            for key, window in self._windows.items()
            if not window or window[-1] < self._newest - self.rules[key[0]].window_seconds
        ]
        for key in idle:
            del self._windows[key]


def _slide(window: deque[float], moment: float, window_seconds: float) -> None:
    """Insert `moment` in order and drop what is older than the window before the newest entry."""
    if not window or moment >= window[-1]:
        window.append(moment)
    else:  # late arrival: keep the deque sorted
        items = list(window)
        bisect.insort(items, moment)
        window.clear()
        window.extend(items)
    horizon = window[-1] - window_seconds
    while window and window[0] <= horizon:
        window.popleft()


def _derived(rule: AnalyzerRule, group: tuple[str, ...], trigger: HealthEvent) -> HealthEvent:
    template = rule.emit
    described = ", ".join(f"{key}={value}" for key, value in zip(rule.group_by, group, strict=True))
    return dataclasses.replace(
        template,
        node_name=trigger.node_name,
        generated_at=trigger.generated_at,
        entities=trigger.entities,
        error_codes=template.error_codes or trigger.error_codes,
        message=f"{template.message} ({rule.threshold} within {_duration(rule.window_seconds)}; {described})",
        metadata={
            **template.metadata,
            "rule": rule.name,
            "group": described,
            "trigger": trigger.idempotency_key,
        },
    )


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


# -- loading ------------------------------------------------------------------------------------


class _RuleDoc(schema.Section, frozen=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    match: str
    group_by: Annotated[list[str], msgspec.Meta(min_length=1)]
    window_seconds: Annotated[float, msgspec.Meta(gt=0)]
    threshold: Annotated[int, msgspec.Meta(ge=1)]
    emit: dict[str, Any]
    """HealthEvent fields of the derived event (camelCase; old snake_case keys warned about)."""
    description: str = ""
    check_names: list[Annotated[str, msgspec.Meta(min_length=1)]] = msgspec.field(default_factory=list)


class RulesDocument(schema.Section, frozen=True):
    """The AnalyzerRules file as written (camelCase keys; old snake_case keys read with a warning)."""

    api_version: str
    kind: str
    rules: Annotated[list[_RuleDoc], msgspec.Meta(min_length=1)]


def shipped_rules() -> list[AnalyzerRule]:
    """The shipped rules (`dsx.files.health_files` reads a rules file a user names)."""
    return rules_from_dict(catalog.mapping(*RULES_PARTS), source=str(RULES_PATH))


def rules_from_dict(data: Mapping[str, Any], *, source: str) -> list[AnalyzerRule]:
    doc = schema.document(
        data, RulesDocument, api_version=API_VERSION, kind_name=KIND, source=source, log=log, separator=": "
    )
    rules = [_rule(item, f"{source}: rules[{index}]") for index, item in enumerate(doc.rules)]
    names = [rule.name for rule in rules]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate:
        raise BadInputError(f"{source}: rule name {duplicate!r} is used twice")
    return rules


def _rule(doc: _RuleDoc, where: str) -> AnalyzerRule:
    for key in doc.group_by:
        if key not in GROUP_KEYS:
            raise BadInputError(allowed_values_message(f"{where}.groupBy", "key", key, GROUP_KEYS))
    schema.warn_renamed(log, f"{where}.emit", health.old_keys(doc.emit))
    template = HealthEvent.template({"checkName": doc.name, **doc.emit}, agent=AGENT, source=f"{where}.emit")
    return AnalyzerRule(
        name=doc.name,
        description=doc.description,
        check_names=frozenset(doc.check_names),
        match=health.event_rule(doc.match, ["event"], where=f"{where}.match", log=log),
        group_by=tuple(doc.group_by),
        window_seconds=doc.window_seconds,
        threshold=doc.threshold,
        emit=template,
    )
