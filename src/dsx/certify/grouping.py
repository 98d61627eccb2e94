"""Which nodes take part, and how they are grouped, from labels alone.

Eligibility (NVCRE's discovery filters, in order): the target selects the node; cordoned
nodes are skipped (uncordoning is what makes a repaired node eligible again); nodes
reporting fewer allocatable GPUs than a run needs are skipped (absent counts as unknown and
is kept); when GPU architectures are mixed, the majority architecture stays (a tie goes to
the architecture of the name-first node; unlabelled nodes do not vote). Every skipped node is
listed with its cause, and the result becomes INCOMPLETE rather than PASSED.

Groups: intra-node = one group per node; intra-group = one group per NVLink clique
(`nvidia.com/gpu.clique`) or, without cliques, per rack/block label, all nodes together when
nothing is labelled; full-scale = everyone. A group smaller than the category's minimum is
topped up from the largest group (NVCRE's overflow borrowing) so every node is tested.
Deterministic: nodes and groups are sorted by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dsx.model import certification as model

CLIQUE_LABEL = "nvidia.com/gpu.clique"
PRODUCT_LABEL = "nvidia.com/gpu.product"
RACK_LABELS = (
    "topology.k8s.aws/network-node-layer-1",
    "cloud.google.com/gce-topology-block",
    "kubernetes.azure.com/ppg",
    "topology.kubernetes.io/rack",
)


@dataclass(frozen=True)
class Group:
    name: str
    nodes: tuple[str, ...]
    domain: str = ""  # the clique or rack the group stands for, "" when none
    borrowed: tuple[str, ...] = ()  # nodes tested in another group too, added to reach the minimum


@dataclass(frozen=True)
class Eligibility:
    eligible: tuple[model.CandidateNode, ...]
    excluded: Mapping[str, model.ExclusionCause]
    architecture: str


def architecture(product: str) -> str:
    """`NVIDIA-H100-80GB-HBM3` → `h100`, `NVIDIA-GB200-NVL72` → `gb200`, RTX PRO 6000 → `rtxpro6000`."""
    name = product.strip()
    if not name:
        return ""
    if "RTX-PRO-6000" in name.upper().replace(" ", "-"):
        return "rtxpro6000"
    name = name.removeprefix("NVIDIA-").removeprefix("NVIDIA ")
    return name.replace(" ", "-").split("-")[0].lower()


def eligibility(nodes: Iterable[model.CandidateNode], target: model.Target, *, gpus_per_node: int = 0) -> Eligibility:
    candidates = sorted(nodes, key=lambda n: n.name)
    excluded: dict[str, model.ExclusionCause] = {}
    kept: list[model.CandidateNode] = []
    for node in candidates:
        if not target.selects(node):
            continue
        if node.unschedulable:
            excluded[node.name] = model.ExclusionCause.CORDONED
        elif node.allocatable_gpus is not None and node.allocatable_gpus > 0 and node.allocatable_gpus < gpus_per_node:
            excluded[node.name] = model.ExclusionCause.TOO_FEW_GPUS
        else:
            kept.append(node)
    votes = Counter(architecture(n.gpu_product) for n in kept if n.gpu_product)
    majority = ""
    if votes:
        top = max(votes.values())
        leaders = {a for a, c in votes.items() if c == top}
        majority = next(architecture(n.gpu_product) for n in kept if architecture(n.gpu_product) in leaders)
        for node in kept:
            if node.gpu_product and architecture(node.gpu_product) != majority:
                excluded[node.name] = model.ExclusionCause.MINORITY_ARCHITECTURE
        kept = [n for n in kept if n.name not in excluded]
    if target.node_count is not None:
        kept = kept[: target.node_count]
    return Eligibility(tuple(kept), dict(sorted(excluded.items())), majority)


def domains(nodes: Iterable[model.CandidateNode]) -> dict[str, str]:
    """Node → topology domain: the clique if labelled, else the first rack/block label, else ""."""
    out: dict[str, str] = {}
    for node in nodes:
        value = node.labels.get(CLIQUE_LABEL, "")
        if not value:
            value = next((node.labels[k] for k in RACK_LABELS if node.labels.get(k)), "")
        out[node.name] = value
    return out


def partition(nodes: Sequence[model.CandidateNode], scale: model.Scale, *, min_nodes: int = 2) -> list[Group]:
    names = sorted(n.name for n in nodes)
    if not names:
        return []
    if scale is model.Scale.INTRA_NODE:
        return [Group(name=n, nodes=(n,)) for n in names]
    if scale is model.Scale.FULL_SCALE:
        return [Group(name="full-scale", nodes=tuple(names))]
    by_domain: dict[str, list[str]] = {}
    for name, domain in sorted(domains(nodes).items()):
        by_domain.setdefault(domain, []).append(name)
    if set(by_domain) == {""}:
        return [Group(name="all-nodes", nodes=tuple(names))]
    groups = [
        Group(name=f"domain-{domain}" if domain else "unlabelled", nodes=tuple(members), domain=domain)
        for domain, members in sorted(by_domain.items())
    ]
    return _top_up(groups, min_nodes)


def _top_up(groups: list[Group], min_nodes: int) -> list[Group]:
    small = [g for g in groups if len(g.nodes) < min_nodes]
    if not small:
        return groups
    large = [g for g in groups if len(g.nodes) >= min_nodes]
    if not large:
        merged = tuple(sorted(n for g in groups for n in g.nodes))
        return [Group(name="overflow", nodes=merged)]
    donor = max(large, key=lambda g: (len(g.nodes), g.name))
    out = list(large)
    for group in small:
        need = min_nodes - len(group.nodes)
        borrowed = tuple(donor.nodes[:need])
        out.append(
            Group(name=f"{group.name}-overflow", nodes=group.nodes + borrowed, domain=group.domain, borrowed=borrowed)
        )
    return sorted(out, key=lambda g: g.name)
