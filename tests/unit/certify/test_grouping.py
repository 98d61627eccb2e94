"""Area of concern: eligibility exclusions (cordoned, too few GPUs, minority architecture) and
topology-aware groups are deterministic and cover every eligible node."""

from __future__ import annotations

from dsx.certify import grouping
from dsx.model import certification as model


def _node(name: str, clique: str = "", product: str = "NVIDIA-H100-80GB-HBM3", **extra: object) -> model.CandidateNode:
    labels = {grouping.CLIQUE_LABEL: clique} if clique else {}
    return model.CandidateNode(name=name, labels=labels, gpu_product=product, **extra)  # type: ignore[arg-type]


def test_exclusions_are_listed_with_their_cause() -> None:
    nodes = [
        _node("a"),
        _node("b", unschedulable=True),
        _node("c", allocatable_gpus=4),
        _node("d", product="NVIDIA-A100-SXM4-80GB"),
        _node("e"),
        _node("f", allocatable_gpus=None),
    ]
    plan = grouping.eligibility(nodes, model.Target(), gpus_per_node=8)
    assert [n.name for n in plan.eligible] == ["a", "e", "f"]
    assert plan.excluded == {
        "b": model.ExclusionCause.CORDONED,
        "c": model.ExclusionCause.TOO_FEW_GPUS,
        "d": model.ExclusionCause.MINORITY_ARCHITECTURE,
    }
    assert plan.architecture == "h100"


def test_architecture_names() -> None:
    assert grouping.architecture("NVIDIA-GB200-NVL72") == "gb200"
    assert grouping.architecture("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition") == "rtxpro6000"
    assert grouping.architecture("") == ""


def test_groups_follow_cliques_and_small_cliques_borrow() -> None:
    nodes = [_node(f"n{i}", clique=f"uuid.{i // 4}") for i in range(9)]
    groups = grouping.partition(nodes, model.Scale.INTRA_GROUP, min_nodes=2)
    covered = {n for g in groups for n in g.nodes}
    assert covered == {n.name for n in nodes}
    by_name = {g.name: g for g in groups}
    assert by_name["domain-uuid.0"].nodes == ("n0", "n1", "n2", "n3")
    overflow = by_name["domain-uuid.2-overflow"]
    assert overflow.nodes[0] == "n8" and len(overflow.nodes) == 2 and overflow.borrowed


def test_scales() -> None:
    nodes = [_node(f"n{i}") for i in range(3)]
    assert [g.nodes for g in grouping.partition(nodes, model.Scale.INTRA_NODE)] == [("n0",), ("n1",), ("n2",)]
    assert [g.nodes for g in grouping.partition(nodes, model.Scale.FULL_SCALE)] == [("n0", "n1", "n2")]
    assert [g.name for g in grouping.partition(nodes, model.Scale.INTRA_GROUP)] == ["all-nodes"]


def test_node_selector_and_count() -> None:
    nodes = [model.CandidateNode(f"n{i}", labels={"pool": "a" if i % 2 else "b"}) for i in range(6)]
    plan = grouping.eligibility(nodes, model.Target(node_selector={"pool": "a"}, node_count=2))
    assert [n.name for n in plan.eligible] == ["n1", "n3"]
