"""Node pools: the nodes that are meant to be identical, so any difference among them is drift.

A pool is named by the first pool label a node carries (a dsx label, the cloud's node group,
Karpenter's node pool), falling back to the instance type. Conformance holds GPU facts
consistent inside each pool; `dsx diff` reports label drift inside each pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from dsx.model import snapshot

POOL_LABELS = (
    "dsx.run/pool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "oci.oraclecloud.com/node-pool-id",
    "karpenter.sh/nodepool",
    "node.kubernetes.io/instance-type",
)
UNPOOLED = "(no pool label)"


def pool_of(node: snapshot.Node) -> str:
    for label in POOL_LABELS:
        value = node.labels.get(label)
        if value:
            return f"{label}={value}"
    return UNPOOLED


def group(nodes: Iterable[snapshot.Node]) -> dict[str, list[snapshot.Node]]:
    """Pool name → its nodes, both sorted."""
    out: dict[str, list[snapshot.Node]] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        out.setdefault(pool_of(node), []).append(node)
    return dict(sorted(out.items()))


def spread(nodes: Iterable[snapshot.Node], fact: Callable[[snapshot.Node], str | None]) -> dict[str, list[str]]:
    """Value → the nodes that have it (absent values read as `(none)`); one key means consistent."""
    out: dict[str, list[str]] = {}
    for node in nodes:
        value = fact(node)
        out.setdefault("(none)" if value is None else value, []).append(node.name)
    return dict(sorted(out.items()))


def describe_spread(values: Mapping[str, list[str]]) -> str:
    """`580.95.05 on a, b; 570.1 on c` — most common value first."""
    ranked = sorted(values.items(), key=lambda item: (-len(item[1]), item[0]))
    return "; ".join(f"{value} on {', '.join(names)}" for value, names in ranked)
