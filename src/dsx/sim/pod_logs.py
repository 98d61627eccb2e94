"""Give a simulated pod a log, so `kubectl logs` (and `KubeClient.pod_logs`) return it.

kwok answers the apiserver's log requests from files in the CRI log format the kubelet
uses (`<RFC 3339 time> stdout F <line>`). `seed` writes such a file under the cluster's
`pod-logs/<namespace>/<pod>/` and points kwok at it with a `Logs` object named after the pod.
Pods nobody seeded show an empty log, like a container that printed nothing.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from dsx import errors
from dsx.kube.client import KubeClient
from dsx.sim import kwok
from dsx.sim.cluster import SimCluster

ALL_CONTAINERS = "_all"


def cri_format(text: str, *, stream: str = "stdout", when: datetime.datetime | None = None) -> str:
    """Text as CRI log lines (one per input line, full-line tag `F`)."""
    if stream not in ("stdout", "stderr"):
        raise errors.BadInputError(errors.allowed_values_message("pod log", "stream", stream, ("stdout", "stderr")))
    stamp = (when or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "".join(f"{stamp} {stream} F {line}\n" for line in text.splitlines())


def log_file(cluster: SimCluster, namespace: str, pod: str, container: str | None = None) -> Path:
    return cluster.pod_logs_dir / namespace / pod / f"{container or ALL_CONTAINERS}.log"


def seed(
    cluster: SimCluster,
    kube: KubeClient,
    namespace: str,
    pod: str,
    text: str,
    *,
    container: str | None = None,
    append: bool = False,
    stream: str = "stdout",
) -> Path:
    """Make `text` the log of a pod (of one container, or of every container when None).

    The pod need not exist yet; appending to the returned file later shows up in the log
    (kwok reads the file on every request, so `kubectl logs -f` follows it).
    """
    path = log_file(cluster, namespace, pod, container)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a" if append else "w", encoding="utf-8") as handle:
        handle.write(cri_format(text, stream=stream))
    entries = []
    for seeded in sorted(path.parent.glob("*.log")):
        entry: dict[str, object] = {"logsFile": str(seeded)}
        if seeded.stem != ALL_CONTAINERS:
            entry["containers"] = [seeded.stem]
        entries.append(entry)
    kube.apply(
        {
            "apiVersion": f"{kwok.KWOK_GROUP}/v1alpha1",
            "kind": "Logs",
            "metadata": {"name": pod, "namespace": namespace},
            "spec": {"logs": entries},
        },
        force=True,
    )
    return path
