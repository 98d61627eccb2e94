"""Drift: what differs between the golden baseline and what runs, as a list of typed changes.

Three comparisons share one change model:

- recipe → snapshot (or the live cluster): components missing or extra, chart version,
  namespace and release status, Helm values key by key (the release's user-supplied values
  against the recipe's merged values, both ways), and label drift inside each node pool;
- recipe → recipe: components, versions, values, constraints and other fields;
- snapshot → snapshot: server version, nodes added or removed, per-node labels, taints,
  capacity, node info and host facts, releases, workload images, the ClusterPolicy.

The left side is the baseline (`expected`), the right side what was found (`actual`).
Metadata (capture time, generator, digests) is never drift. A component the snapshot could not
judge (its Helm releases or workloads were unreadable) is listed in `not_compared` with the
reason, never reported missing.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsx.errors import BadInputError
from dsx.model import aicr, recipe, snapshot
from dsx.validation import deployment, pools

API_VERSION = "dsx.run/v1alpha1"
KIND = "DriftReport"


class DriftKind(enum.StrEnum):
    MISSING_COMPONENT = "missing-component"
    EXTRA_COMPONENT = "extra-component"
    VERSION = "version"
    NAMESPACE = "namespace"
    STATUS = "status"
    VALUES = "values"
    FIELD = "field"
    CONSTRAINT = "constraint"
    SERVER_VERSION = "server-version"
    NODE_ADDED = "node-added"
    NODE_REMOVED = "node-removed"
    NODE = "node"
    POOL_LABEL = "pool-label"
    WORKLOAD = "workload"
    CLUSTER_POLICY = "cluster-policy"


class _Absent:
    """Marks a key or list item that exists on one side only."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()
# labels that differ from node to node by design: placement, identity, timestamps, and dsx's
# own operational state (quarantine, simulator bookkeeping) — the pool label itself excepted
_PER_NODE_LABELS = ("kubernetes.io/hostname", "nvidia.com/gpu.clique", "nvidia.com/gfd.timestamp")
_PER_NODE_PATTERN = re.compile(r"topology|failure-domain|^(?:[a-z0-9.-]+\.)?dsx\.run/(?!pool$)")


@dataclass(frozen=True)
class Change:
    kind: DriftKind
    subject: str
    path: str = ""
    expected: Any = ABSENT
    actual: Any = ABSENT
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "subject": self.subject}
        if self.path:
            out["path"] = self.path
        if self.expected is not ABSENT:
            out["expected"] = self.expected
        if self.actual is not ABSENT:
            out["actual"] = self.actual
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class Side:
    kind: str
    name: str
    source: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "source": self.source}


@dataclass(frozen=True)
class DriftReport:
    expected: Side
    actual: Side
    changes: tuple[Change, ...]
    notes: tuple[str, ...] = ()
    not_compared: tuple[str, ...] = ()
    """Subjects the comparison could not judge (facts the snapshot could not read), with the reason."""

    @property
    def drifted(self) -> bool:
        return bool(self.changes)

    @property
    def complete(self) -> bool:
        return not self.not_compared

    def to_dict(self) -> dict[str, Any]:
        summary: dict[str, int] = {}
        for change in self.changes:
            summary[change.kind.value] = summary.get(change.kind.value, 0) + 1
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "expected": self.expected.to_dict(),
            "actual": self.actual.to_dict(),
            "drift": self.drifted,
            "summary": dict(sorted(summary.items())),
            "changes": [c.to_dict() for c in self.changes],
            "notes": list(self.notes),
            "notCompared": list(self.not_compared),
        }


# ---- values, key by key ------------------------------------------------------------------


def path_join(base: str, key: object) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    text = str(key)
    if re.fullmatch(r"[A-Za-z0-9_\-]+", text):
        return f"{base}.{text}" if base else text
    return f'{base}["{text}"]'


def value_changes(expected: Any, actual: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, expected, actual) for every leaf that differs; a side lacking the key gives ABSENT."""
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        out = []
        for key in sorted(set(expected) | set(actual), key=str):
            out += value_changes(expected.get(key, ABSENT), actual.get(key, ABSENT), path_join(path, key))
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        out = []
        for index in range(max(len(expected), len(actual))):
            left = expected[index] if index < len(expected) else ABSENT
            right = actual[index] if index < len(actual) else ABSENT
            out += value_changes(left, right, path_join(path, index))
        return out
    if type(expected) is not type(actual) and not (_number(expected) and _number(actual)):
        return [(path, expected, actual)]
    return [] if expected == actual else [(path, expected, actual)]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value_drift(kind: DriftKind, subject: str, expected: Any, actual: Any, prefix: str = "") -> list[Change]:
    return [Change(kind, subject, p, e, a) for p, e, a in value_changes(expected, actual, prefix)]


# ---- recipe → snapshot -------------------------------------------------------------------


def recipe_vs_snapshot(target: recipe.Recipe, snap: snapshot.Snapshot) -> DriftReport:
    if snap.cluster is None:
        raise BadInputError(f"{snap.source or 'snapshot'}: has no cluster facts; diff needs a cluster snapshot")
    cluster = snap.cluster
    changes: list[Change] = []
    notes: list[str] = []
    not_compared: list[str] = []
    matched: set[tuple[str, str]] = set()
    releases_unread = cluster.unread(*deployment.RELEASE_FACTS)
    workloads_unread = cluster.unread(*deployment.WORKLOAD_FACTS)
    for component in target.ordered_components():
        if component.type is not recipe.ComponentType.HELM:
            found = _non_helm(component, cluster, notes)
            if workloads_unread and found:
                not_compared.append(f"{component.name}: {workloads_unread}")
                continue
            changes += found
            continue
        release = cluster.release(component.name, component.namespace) or next(
            (r for r in cluster.helm_releases if r.namespace == component.namespace and r.chart == component.chart),
            None,
        )
        if release is None:
            elsewhere = next((r for r in cluster.helm_releases if r.name == component.name), None)
            if elsewhere is not None:
                matched.add((elsewhere.namespace, elsewhere.name))
                changes.append(
                    Change(DriftKind.NAMESPACE, component.name, "", component.namespace, elsewhere.namespace)
                )
                release = elsewhere
            elif releases_unread:
                not_compared.append(f"{component.name}: {releases_unread}")
                continue
            else:
                changes.append(
                    Change(DriftKind.MISSING_COMPONENT, component.name, "", f"{component.chart} {component.version}")
                )
                continue
        matched.add((release.namespace, release.name))
        if not deployment.same_version(release.version, component.version):
            changes.append(Change(DriftKind.VERSION, component.name, "", component.version, release.version))
        if release.status != "deployed":
            changes.append(Change(DriftKind.STATUS, component.name, "", "deployed", release.status))
        changes += _value_drift(DriftKind.VALUES, component.name, component.values, dict(release.values))
    for release in cluster.helm_releases:
        if (release.namespace, release.name) not in matched:
            changes.append(
                Change(
                    DriftKind.EXTRA_COMPONENT,
                    f"{release.namespace}/{release.name}",
                    "",
                    ABSENT,
                    f"{release.chart} {release.version}",
                )
            )
    changes += pool_label_drift(snap.nodes)
    return DriftReport(
        Side("Recipe", target.metadata.name, target.source),
        Side("Snapshot", "live cluster" if snap.source in ("", "live") else snap.source, snap.source or "live"),
        tuple(changes),
        tuple(notes),
        tuple(not_compared),
    )


def _non_helm(component: recipe.ComponentRef, cluster: snapshot.ClusterFacts, notes: list[str]) -> list[Change]:
    """Manifest and Kustomize components are found by an image tagged with the pinned version."""
    images = [i for w in cluster.workloads if w.namespace == component.namespace for i in w.images]
    if any(deployment.same_version(deployment.image_tag(i), component.version) for i in images):
        return []
    if not images and deployment.defined_by_crds(component):
        notes.append(f"{component.name}: installs only CRDs; dsx validate --phase deployment checks them")
        return []
    if images:
        tags = sorted({deployment.image_tag(i) or "(untagged)" for i in images})
        return [Change(DriftKind.VERSION, component.name, "", component.version, ", ".join(tags))]
    return [Change(DriftKind.MISSING_COMPONENT, component.name, "", f"{component.type.value} {component.version}")]


def _pool_labels(node: snapshot.Node) -> dict[str, str]:
    return {
        k: v
        for k, v in node.labels.items()
        if k not in _PER_NODE_LABELS and not _PER_NODE_PATTERN.search(k) and v != node.name
    }


def _label_of(labels: Mapping[str, Mapping[str, str]], key: str, node: snapshot.Node) -> str | None:
    return labels[node.name].get(key)


def pool_label_drift(nodes: Iterable[snapshot.Node]) -> list[Change]:
    """Labels whose values disagree among the nodes of one pool (placement labels left out)."""
    changes = []
    for pool, members in pools.group(nodes).items():
        if len(members) < 2:
            continue
        labels = {n.name: _pool_labels(n) for n in members}
        for key in sorted({k for found in labels.values() for k in found}):
            spread = pools.spread(members, functools.partial(_label_of, labels, key))
            if len(spread) > 1:
                common = max(spread.items(), key=lambda item: (len(item[1]), item[0]))[0]
                changes.append(
                    Change(
                        DriftKind.POOL_LABEL,
                        pool,
                        key,
                        common,
                        {v: names for v, names in spread.items() if v != common},
                        pools.describe_spread(spread),
                    )
                )
    return changes


# ---- recipe → recipe ---------------------------------------------------------------------


def recipe_vs_recipe(left: recipe.Recipe, right: recipe.Recipe) -> DriftReport:
    changes: list[Change] = []
    left_refs = {c.name: c for c in left.component_refs}
    right_refs = {c.name: c for c in right.component_refs}
    for name in sorted(set(left_refs) - set(right_refs)):
        changes.append(Change(DriftKind.MISSING_COMPONENT, name, "", left_refs[name].version))
    for name in sorted(set(right_refs) - set(left_refs)):
        changes.append(Change(DriftKind.EXTRA_COMPONENT, name, "", ABSENT, right_refs[name].version))
    for name in sorted(set(left_refs) & set(right_refs)):
        a, b = left_refs[name].to_dict(), right_refs[name].to_dict()
        if a["version"] != b["version"]:
            changes.append(Change(DriftKind.VERSION, name, "", a["version"], b["version"]))
        if a["namespace"] != b["namespace"]:
            changes.append(Change(DriftKind.NAMESPACE, name, "", a["namespace"], b["namespace"]))
        for key in sorted(set(a) | set(b)):
            if key in ("name", "version", "namespace", "values"):
                continue
            changes += _value_drift(DriftKind.FIELD, name, a.get(key, ABSENT), b.get(key, ABSENT), key)
        changes += _value_drift(DriftKind.VALUES, name, a["values"], b["values"])
    left_constraints = {c.name: c.expression() for c in left.constraints}
    right_constraints = {c.name: c.expression() for c in right.constraints}
    for key in sorted(set(left_constraints) | set(right_constraints)):
        if left_constraints.get(key) != right_constraints.get(key):
            changes.append(
                Change(
                    DriftKind.CONSTRAINT,
                    key,
                    "",
                    left_constraints.get(key, ABSENT),
                    right_constraints.get(key, ABSENT),
                )
            )
    changes += _value_drift(DriftKind.FIELD, "recipe", left.certification, right.certification, "certification")
    changes += _value_drift(
        DriftKind.FIELD, "recipe", list(left.deployment_order), list(right.deployment_order), "deploymentOrder"
    )
    changes += _value_drift(
        DriftKind.FIELD, "recipe", dict(left.metadata.criteria), dict(right.metadata.criteria), "criteria"
    )
    return DriftReport(
        Side("Recipe", left.metadata.name, left.source),
        Side("Recipe", right.metadata.name, right.source),
        tuple(changes),
    )


# ---- snapshot → snapshot -----------------------------------------------------------------


def snapshot_vs_snapshot(left: snapshot.Snapshot, right: snapshot.Snapshot) -> DriftReport:
    changes: list[Change] = []
    a_cluster, b_cluster = left.cluster, right.cluster
    if a_cluster is not None and b_cluster is not None:
        if a_cluster.server_version != b_cluster.server_version:
            changes.append(
                Change(DriftKind.SERVER_VERSION, "cluster", "", a_cluster.server_version, b_cluster.server_version)
            )
        changes += _releases(a_cluster.helm_releases, b_cluster.helm_releases)
        changes += _workloads(a_cluster.workloads, b_cluster.workloads)
        changes += _value_drift(
            DriftKind.CLUSTER_POLICY, "ClusterPolicy", a_cluster.cluster_policy or {}, b_cluster.cluster_policy or {}
        )
    a_nodes = {n.name: n for n in left.nodes}
    b_nodes = {n.name: n for n in right.nodes}
    for name in sorted(set(a_nodes) - set(b_nodes)):
        changes.append(Change(DriftKind.NODE_REMOVED, name, "", a_nodes[name].gpu_product or "node", ABSENT))
    for name in sorted(set(b_nodes) - set(a_nodes)):
        changes.append(Change(DriftKind.NODE_ADDED, name, "", ABSENT, b_nodes[name].gpu_product or "node"))
    for name in sorted(set(a_nodes) & set(b_nodes)):
        a, b = _comparable_node(a_nodes[name]), _comparable_node(b_nodes[name])
        changes += _value_drift(DriftKind.NODE, name, a, b)
    return DriftReport(
        Side("Snapshot", left.source, left.source), Side("Snapshot", right.source, right.source), tuple(changes)
    )


def _comparable_node(node: snapshot.Node) -> dict[str, Any]:
    doc = node.to_dict()
    doc.pop("name", None)
    doc.pop("gpu", None)  # derived from the labels, which are compared themselves
    labels = doc.get("labels")
    if isinstance(labels, dict):
        labels.pop("nvidia.com/gfd.timestamp", None)
    return doc


def _releases(left: Sequence[snapshot.HelmRelease], right: Sequence[snapshot.HelmRelease]) -> list[Change]:
    a = {f"{r.namespace}/{r.name}": r for r in left}
    b = {f"{r.namespace}/{r.name}": r for r in right}
    changes = [
        Change(DriftKind.MISSING_COMPONENT, k, "", f"{a[k].chart} {a[k].version}") for k in sorted(set(a) - set(b))
    ]
    changes += [
        Change(DriftKind.EXTRA_COMPONENT, k, "", ABSENT, f"{b[k].chart} {b[k].version}")
        for k in sorted(set(b) - set(a))
    ]
    for key in sorted(set(a) & set(b)):
        if a[key].version != b[key].version or a[key].chart != b[key].chart:
            changes.append(
                Change(
                    DriftKind.VERSION, key, "", f"{a[key].chart} {a[key].version}", f"{b[key].chart} {b[key].version}"
                )
            )
        if a[key].status != b[key].status:
            changes.append(Change(DriftKind.STATUS, key, "", a[key].status, b[key].status))
        changes += _value_drift(DriftKind.VALUES, key, dict(a[key].values), dict(b[key].values))
    return changes


def _workloads(left: Sequence[snapshot.Workload], right: Sequence[snapshot.Workload]) -> list[Change]:
    a = {f"{w.kind}/{w.namespace}/{w.name}": list(w.images) for w in left}
    b = {f"{w.kind}/{w.namespace}/{w.name}": list(w.images) for w in right}
    changes = [Change(DriftKind.WORKLOAD, k, "images", a[k], ABSENT) for k in sorted(set(a) - set(b))]
    changes += [Change(DriftKind.WORKLOAD, k, "images", ABSENT, b[k]) for k in sorted(set(b) - set(a))]
    changes += [Change(DriftKind.WORKLOAD, k, "images", a[k], b[k]) for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return changes


# ---- documents of either kind ------------------------------------------------------------


def compare_documents(
    left: Mapping[str, Any], right: Mapping[str, Any], *, left_source: str, right_source: str
) -> DriftReport:
    """Two recipes or two snapshots (or a recipe and a snapshot, in that order); AICR snapshots are snapshots."""
    kinds = tuple(snapshot.KIND if aicr.is_aicr_snapshot(d) else d.get("kind") for d in (left, right))
    if kinds == (recipe.KIND, recipe.KIND):
        return recipe_vs_recipe(
            recipe.Recipe.from_dict(left, source=left_source), recipe.Recipe.from_dict(right, source=right_source)
        )
    if kinds == (snapshot.KIND, snapshot.KIND):
        return snapshot_vs_snapshot(
            snapshot.Snapshot.from_dict(left, source=left_source),
            snapshot.Snapshot.from_dict(right, source=right_source),
        )
    if kinds == (recipe.KIND, snapshot.KIND):
        return recipe_vs_snapshot(
            recipe.Recipe.from_dict(left, source=left_source),
            snapshot.Snapshot.from_dict(right, source=right_source),
        )
    raise BadInputError(
        f"{left_source}, {right_source}: cannot compare kind {kinds[0]!r} with {kinds[1]!r}; "
        "allowed: Recipe and Recipe, Snapshot and Snapshot, Recipe and Snapshot"
    )


def render_value(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def table_rows(report: DriftReport) -> list[list[str]]:
    return [[c.kind.value, c.subject, c.path, render_value(c.expected), render_value(c.actual)] for c in report.changes]
