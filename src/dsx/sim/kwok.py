"""kwok's configuration for a simulated cluster: our Stage files and where pod logs come from.

Stages (dsx/sim/stages/*.yaml) decide how fake nodes and pods move through their lifecycle;
they are ours, not kwok's defaults, so annotations can drive completion, exit codes,
container waiting states and node faults (see docs/sim.md).

Pod logs: kwok serves `kubectl logs` from files. A static ClusterLogs points every pod at an
empty file (a container that printed nothing); a `Logs` object named after a pod (kwok CRD,
created by `dsx.sim.pod_logs.seed`) points that pod at its own file.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dsx import serialization

KWOK_GROUP = "kwok.x-k8s.io"
STAGE_FILES = (
    "node-initialize.yaml",
    "node-heartbeat.yaml",
    "node-not-ready.yaml",
    "pod-ready.yaml",
    "pod-waiting.yaml",
    "pod-complete.yaml",
    "pod-delete.yaml",
)
POD_CIDR = "10.244.0.1/16"
NODE_LEASE_SECONDS = 40
LARGE_FLEET_NODES = 500
"""Above this many nodes, `fleet_tuning` stretches the node leases (see docs/sim.md, "Fleet size")."""
LARGE_FLEET_LEASE_SECONDS = 1200
LARGE_FLEET_GRACE_SECONDS = 1300
LARGE_FLEET_PARALLELISM = 16


@dataclass(frozen=True)
class FleetTuning:
    """How often the fake kubelets heartbeat, and how long the node controller waits for one.

    kwok renews each node's Lease about every quarter of its duration: 40 s leases are ~0.1
    writes per node per second, 1,000 writes/s at 10,000 nodes, more than two cores of etcd and
    apiserver can absorb next to the system under test. A larger fleet gets 1,200 s leases
    (~33 writes/s at 10,000 nodes) and a node-monitor grace period beyond them, so the node
    lifecycle controller does not mark nodes NotReady between renewals. The trade: a kwok that
    dies is noticed after the grace period, not 40 s; the `not-ready` fault is unaffected (a
    stage writes the condition itself).
    """

    lease_seconds: int
    node_monitor_grace_seconds: int | None
    """kube-controller-manager's --node-monitor-grace-period; None: its default."""
    node_parallelism: int = 4
    """kwok's workers for node stages and leases: more let 10,000 nodes turn Ready in minutes."""
    watch_cache: bool = False
    """The apiserver's watch cache. Off for small fleets, so a compacted resume point is a real
    410 Gone (watch-recovery tests rely on it); on for large ones, where serving every watcher's
    events and lists of 10,000 Nodes straight from etcd would be the control plane's largest cost."""


def fleet_tuning(node_count: int) -> FleetTuning:
    if node_count <= LARGE_FLEET_NODES:
        return FleetTuning(NODE_LEASE_SECONDS, None)
    return FleetTuning(LARGE_FLEET_LEASE_SECONDS, LARGE_FLEET_GRACE_SECONDS, LARGE_FLEET_PARALLELISM, watch_cache=True)


LOGS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"logs.{KWOK_GROUP}"},
    "spec": {
        "group": KWOK_GROUP,
        "names": {"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "Which file kwok serves as the log of the pod of the same name.",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["logs"],
                                "properties": {
                                    "logs": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "containers": {"type": "array", "items": {"type": "string"}},
                                                "logsFile": {"type": "string"},
                                                "previousLogsFile": {"type": "string"},
                                                "follow": {"type": "boolean"},
                                            },
                                        },
                                    }
                                },
                            },
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def stages() -> list[dict[str, Any]]:
    docs = []
    folder = resources.files("dsx.sim").joinpath("stages")
    for name in STAGE_FILES:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        docs.append(serialization.parse_yaml(text, source=f"dsx/sim/stages/{name}"))
    return docs


def configuration(*, empty_log: Path, tuning: FleetTuning | None = None) -> str:
    """The multi-document file passed to `kwok --config` (`tuning`: a small fleet's by default)."""
    tuning = tuning or fleet_tuning(1)
    documents: list[Any] = [
        {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            # kwok applies none of its option defaults when a config file is given: spell them out
            "options": {
                "cidr": POD_CIDR,
                "manageAllNodes": False,
                "enableDebuggingHandlers": True,
                "enableContentionProfiling": False,
                "enableProfilingHandler": False,
                "enablePodsOnNodeSyncListPager": True,
                "enablePodsOnNodeSyncStreamWatch": False,
                "nodeLeaseDurationSeconds": tuning.lease_seconds,
                "nodeLeaseParallelism": tuning.node_parallelism,
                "nodePlayStageParallelism": tuning.node_parallelism,
                "podPlayStageParallelism": 4,
                "podsOnNodeSyncParallelism": 2,
            },
        },
        *stages(),
        {
            "apiVersion": f"{KWOK_GROUP}/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "dsx-sim-unseeded"},
            "spec": {"logs": [{"logsFile": str(empty_log)}]},
        },
    ]
    return serialization.dump_yaml_documents(documents)
