"""Validation requests: certify nodes across their life, not only on day one.

A request asks "certify this node before it (re)enters service". They come from:
- **recertify** — a repaired node in RECERTIFYING (`dsx.health.decisions.recertify`), node-level categories;
- **joined** — a GPU node that appeared after the sentinel started watching: it gets the
  `not-yet-certified` taint at once and must pass the node-level categories plus a group test
  alongside known-good nodes before the taint comes off. Joining nodes are batched: the first
  opens a batch (kept in the store), and when `joiningBatchSeconds` have passed every node in it
  is queued at once, so a rack that joins over a minute is certified as one wave;
- **drift** — `dsx diff` found a driver, recipe or node change: the affected nodes are
  re-validated (tainted only while their own test runs, so a cluster-wide change never takes the
  whole fleet out at once);
- **manual** — `dsx sentinel request-validation --node N`.

Requests live in the event store (`request_validation`, `start_validations`, `finish_validation`),
so they survive restarts and `dsx sentinel status` shows them. The runner
(`dsx.pipeline.validations`) starts at most `max_running` at once (certification is heavy,
and a fleet-wide drift must not run everywhere together) and re-runs requests that were RUNNING
when a previous sentinel stopped. Groups never share a node: a known-good peer serves one group
test at a time, and a run waits for free peers rather than certify beside a node another test is
loading.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from dsx import cel
from dsx.errors import BadInputError
from dsx.health.decisions import nodes
from dsx.health.decisions.eventstore import OPEN_VALIDATION, EventStore, ValidationRequest
from dsx.health.decisions.policy import SentinelPolicy, Stage
from dsx.health.decisions.ports import (
    NodeChange,
    NodeOps,
    Observer,
)

log = logging.getLogger("dsx.sentinel")

OPEN = OPEN_VALIDATION
BASELINE_DOCUMENT = "validation-baseline"
"""Store document holding when the sentinel began watching for joining nodes."""
BATCH_DOCUMENT = "joining-batch"
"""Store document holding the open batch of joining nodes: when it opened and which nodes it holds."""


class ValidationKind(enum.StrEnum):
    RECERTIFY = "recertify"
    JOINED = "joined"
    DRIFT = "drift"
    MANUAL = "manual"


def reason(kind: ValidationKind, text: str) -> str:
    """A request reason: `<kind>: <text>` (the kind decides which tests run)."""
    return f"{kind.value}: {text}"


def kind_of(request: ValidationRequest) -> ValidationKind:
    head = request.reason.split(":", 1)[0]
    return ValidationKind(head) if head in {k.value for k in ValidationKind} else ValidationKind.MANUAL


def latest(store: EventStore, node_name: str, reason_text: str) -> ValidationRequest | None:
    """The newest request for this node with exactly this reason, in any status."""
    found = [r for r in store.validation_requests() if r.node_name == node_name and r.reason == reason_text]
    return found[-1] if found else None


# -- drift ---------------------------------------------------------------------------------------

FLEET_WIDE_DRIFT = frozenset(
    {"version", "values", "missing-component", "extra-component", "server-version", "cluster-policy", "workload"}
)
"""Drift kinds (dsx.validation.drift) that change what every GPU node runs."""
NODE_DRIFT = frozenset({"node", "node-added", "pool-label"})


def nodes_from_drift(
    report: Mapping[str, Any], gpu_nodes: Iterable[str], *, source: str = "drift report"
) -> dict[str, str]:
    """Node → reason for a `dsx diff` report (kind DriftReport): the nodes whose tests it invalidates."""
    fleet = sorted(gpu_nodes)
    affected: dict[str, list[str]] = {}
    for change in _drift_changes(report, source):
        kind, subject, path = change["kind"], change["subject"], change["path"]
        what = f"{kind} {subject}{' ' + path if path else ''}"
        if kind in NODE_DRIFT and subject in fleet:
            affected.setdefault(subject, []).append(what)
        elif kind in FLEET_WIDE_DRIFT:
            for node in fleet:
                affected.setdefault(node, []).append(what)
    return {node: "; ".join(sorted(set(items)))[:400] for node, items in sorted(affected.items())}


def _drift_changes(report: Mapping[str, Any], source: str) -> list[dict[str, str]]:
    """The report's changes, each field checked: a hand-edited or foreign report fails naming the field."""
    changes = report.get("changes") or []
    if not isinstance(changes, list):
        raise BadInputError(f"{source}: changes: expected a list, got {type(changes).__name__}")
    checked: list[dict[str, str]] = []
    for n, change in enumerate(changes):
        if not isinstance(change, Mapping):
            raise BadInputError(f"{source}: changes[{n}]: expected a mapping, got {type(change).__name__}")
        fields = {key: change.get(key) or "" for key in ("kind", "subject", "path")}
        for key, value in fields.items():
            if not isinstance(value, str):
                raise BadInputError(f"{source}: changes[{n}].{key}: expected a string, got {type(value).__name__}")
        checked.append(fields)
    return checked


# -- joining nodes -------------------------------------------------------------------------------


class JoiningNodes:
    """Holds GPU nodes created after the watch began out of scheduling until they pass validation."""

    def __init__(
        self,
        store: EventStore,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        observer: Observer,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.nodes = node_ops
        self.selector = policy.gpu_node_selector
        self.settings = policy.certification
        self.switch = policy.switch(Stage.VALIDATION)
        self.observer = observer
        self._clock = clock
        chosen = self.settings.joining_selector
        self._chosen = (
            cel.compile_expression(chosen, ("node",), origin="certification.joiningSelector") if chosen else None
        )
        document = self._baseline()
        self.since = float(document["watching_since"])
        self.known = frozenset(document.get("known", ()))
        self.batch_seconds = self.settings.joining_batch_seconds
        batch = self.store.load_breaker(BATCH_DOCUMENT) or {}
        self._batch_nodes: set[str] = set(batch.get("nodes") or ())
        """Nodes in the open batch (the store's document is the truth; this saves a read per node seen)."""

    def _baseline(self) -> dict[str, Any]:
        """When watching began and which GPU nodes existed then (kept in the store across restarts)."""
        document = self.store.load_breaker(BASELINE_DOCUMENT)
        if document is None:
            present = sorted(nodes.name(n) for n in self.nodes.list_nodes(dict(self.selector)))
            document = {"watching_since": self._clock(), "known": present}
            if self.switch.acting:
                self.store.save_breaker(BASELINE_DOCUMENT, document)
        return document

    def observe(self, node: Mapping[str, Any]) -> bool:
        """Called for every Node seen; True when it was newly held for validation."""
        name = nodes.name(node)
        if not nodes.selected(node, self.selector) or nodes.labels_of(node).get(nodes.CERTIFIED_LABEL) == "true":
            return False
        if not self._chosen_by_selector(node):
            return False
        created = _created(node)
        if created is None or not self._joined_after_baseline(name, created):
            return False
        if nodes.has_taint(node, self.settings.taint.key):
            return False
        batched = name in self._batch_nodes  # batched but not tainted: a crash came between the two writes
        if not batched and any(r.node_name == name and r.status in OPEN for r in self.store.validation_requests()):
            return False
        if not self.switch.acting:
            self.observer.action(Stage.VALIDATION.value, "would-hold-joining-node", name, {})
            return False
        if not self._batching:
            self._hold(name, "pending: joined the cluster")
            request = self.store.request_validation(name, reason(ValidationKind.JOINED, "joined the cluster"))
            self.observer.action(Stage.VALIDATION.value, "hold-joining-node", name, {"request_id": request.request_id})
            return True
        closes = self.store.update_breaker(BATCH_DOCUMENT, lambda doc: _joined(doc, name, self._clock()))
        self._batch_nodes.add(name)  # in the store before the taint: a crash in between taints it next time
        self._hold(name, f"pending: joined the cluster (batch closes {_stamp_at(closes + self.batch_seconds)})")
        self.observer.action(Stage.VALIDATION.value, "hold-joining-node", name, {"batch_opened": closes})
        return True

    @property
    def _batching(self) -> bool:
        return self.batch_seconds > 0

    def _hold(self, name: str, note: str) -> None:
        change = NodeChange(add_taints=(self.settings.taint,), annotations={nodes.VALIDATION_ANNOTATION: note})
        self.nodes.change_node(name, change)

    def close_batch(self) -> int:
        """Queue every node of a batch whose period is over (one transaction); returns how many."""
        if not self._batching or not self.switch.acting:
            return 0
        now = self._clock()
        due = self.store.update_breaker(BATCH_DOCUMENT, lambda doc: _closed(doc, now, self.batch_seconds))
        for name in due:
            request = self.store.request_validation(name, reason(ValidationKind.JOINED, "joined the cluster"))
            self.observer.action(Stage.VALIDATION.value, "queue-joining-node", name, {"request_id": request.request_id})
        if due:
            self._batch_nodes.difference_update(due)
            log.info("joining batch closed: %d node(s) queued for validation", len(due), extra={"nodes": due})
        return len(due)

    def _chosen_by_selector(self, node: Mapping[str, Any]) -> bool:
        """`certification.joiningSelector` says yes (no selector: every GPU node); an error says no, logged."""
        if self._chosen is None:
            return True
        try:
            return self._chosen.test({"node": dict(node)})
        except cel.CelEvaluationError as exc:
            log.warning("certification.joiningSelector on node %s: %s", nodes.name(node), exc)
            return False

    def _joined_after_baseline(self, name: str, created: float) -> bool:
        """creationTimestamp has whole seconds: within the baseline's second, the list of known nodes decides."""
        if created > self.since:
            return True
        return created >= math.floor(self.since) and name not in self.known


def _joined(document: dict[str, Any] | None, name: str, now: float) -> tuple[dict[str, Any] | None, float]:
    """Add a node to the open batch (opening one at `now` when none is); returns when it opened."""
    batch = dict(document or {})
    members = list(batch.get("nodes") or ())
    opened = float(batch["opened_at"]) if members and "opened_at" in batch else now
    if name in members:
        return None, opened
    return {"opened_at": opened, "nodes": sorted({*members, name})}, opened


def _closed(document: dict[str, Any] | None, now: float, period: float) -> tuple[dict[str, Any] | None, list[str]]:
    """The batch's nodes once its period is over (the document emptied); [] while it is open."""
    members = list((document or {}).get("nodes") or ())
    if not members or now < float((document or {}).get("opened_at", now)) + period:
        return None, []
    return {"opened_at": now, "nodes": []}, members


def _stamp_at(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _created(node: Mapping[str, Any]) -> float | None:
    text = (node.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
