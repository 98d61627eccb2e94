"""Which fabric a category's runs use: one decision for the pods' set-up and for the thresholds.

A platform (catalog `platforms/`) says how pods reach the fabric (devices, variables, an image
with the fabric's NCCL plugin) and which NCCL network a multi-node run must use there. It is
detected from the nodes (the device every node allocates: EFA, InfiniBand NICs), else named by
`--interconnect`, else TCP. The interconnect a threshold matches follows from the platform and
the shape of the run: one node is NVLink (PCIe on GPUs without it) whatever the NICs are, and its
pods are set up without the network (no NICs, no IPC_LOCK: a baseline Pod Security namespace takes
them); a GB200/GB300 group inside one
NVLink domain (`nvidia.com/gpu.clique`) is MNNVL; otherwise the platform's network. The engine
decides once per category and hands the decision to every run, so the executor renders the
pods for exactly the fabric the thresholds were chosen for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsx.certify.grouping import CLIQUE_LABEL
from dsx.errors import BadInputError, allowed_values_message
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

MNNVL_ACCELERATORS = frozenset({"gb200", "gb300"})
NVLINK_ACCELERATORS = frozenset({"a100", "h100", "h200", "b200", "gb200", "gb300"})
"""GPUs whose peers in one node talk over NVLink: a loopback there must use P2P or NVLS, never SHM."""
FALLBACK = "tcp"
NVLINK = "nvlink"
MNNVL = "mnnvl"
THRESHOLD_ONLY_INTERCONNECTS = frozenset({NVLINK, MNNVL, "pcie", "roce", "tcpxo"})
"""Interconnects a threshold may name that no shipped platform sets pods up for (pods use the detected one)."""


@dataclass(frozen=True)
class Fabric:
    platform: catalog.Platform  # pod set-up
    interconnect: str  # what thresholds match
    expected: frozenset[model.Transport]  # NCCL transports a run must show (empty: any)
    detected: bool  # the platform came from the nodes, not from --interconnect
    one_node: bool = False  # an intra-node run: the pods reach no network, whatever the nodes have

    def describe(self) -> str:
        how = "detected from the nodes" if self.detected else "as asked"
        wanted = "/".join(sorted(t.value for t in self.expected)) or "any transport"
        where = "one node, pods without the network" if self.one_node else f"{self.platform.name} ({how})"
        return f"{where}; thresholds for {self.interconnect}; NCCL must use {wanted}"


def interconnects() -> list[str]:
    """Every value `--interconnect` takes."""
    return sorted({p.interconnect for p in catalog.platforms().values()} | THRESHOLD_ONLY_INTERCONNECTS)


def detect(nodes: Sequence[model.CandidateNode]) -> catalog.Platform:
    """The platform whose device every node allocates, else TCP."""
    shipped = catalog.platforms()
    for platform in shipped.values():
        if platform.detect_resource and nodes and all(n.network_devices.get(platform.detect_resource) for n in nodes):
            return platform
    return shipped[FALLBACK]


def fabric(
    nodes: Sequence[model.CandidateNode],
    *,
    accelerator: str,
    scale: model.Scale,
    requested: str = "",
) -> Fabric:
    """The fabric a category's runs on `nodes` use at `scale`; `requested` is `--interconnect` ("" = detect)."""
    requested = requested.lower()
    if requested and requested not in interconnects():
        raise BadInputError(allowed_values_message("--interconnect", "interconnect", requested, interconnects()))
    named = next((p for p in catalog.platforms().values() if requested and p.interconnect == requested), None)
    if scale is model.Scale.INTRA_NODE:
        nvlink = accelerator in NVLINK_ACCELERATORS
        expected = frozenset({model.Transport.P2P, model.Transport.NVLS}) if nvlink else frozenset()
        return Fabric(catalog.platforms()[FALLBACK], NVLINK if nvlink else "pcie", expected, named is None, True)
    platform = named or detect(nodes)
    if requested in THRESHOLD_ONLY_INTERCONNECTS:
        interconnect = requested
    elif accelerator in MNNVL_ACCELERATORS and _one_clique(nodes):
        interconnect = MNNVL
    else:
        interconnect = platform.interconnect
    expected = frozenset({platform.network}) if platform.network and interconnect != MNNVL else frozenset()
    return Fabric(platform, interconnect, expected, named is None)


def _one_clique(nodes: Sequence[model.CandidateNode]) -> bool:
    cliques = {n.labels.get(CLIQUE_LABEL, "") for n in nodes}
    return len(cliques) == 1 and "" not in cliques
