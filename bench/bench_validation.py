"""Validation speed at fleet scale: snapshot, validate, diff on a 1,000-node GPU cluster.

The cluster is synthetic (the in-memory `FakeClusterReader` serving what a real API server
would list: nodes with GPU Feature Discovery labels, Helm release Secrets in Helm's storage
format, the recipe's workloads, and one device-plugin pod per node), so the figures measure
dsx, not a network. The last figure is the whole `dsx validate --snapshot FILE` process,
YAML parsing included. Run with `make bench` or `python bench/bench_validation.py`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsx import serialization
from dsx.model import criteria as criteria_model
from dsx.model import recipe as recipe_model
from dsx.recipes import catalog, resolve
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, drift, helm_storage, results, run

QUERY = {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training", "platform": "kubeflow"}
NODES = 1000
RUNS = 5
PROCESS_RUNS = 3


def _node(index: int) -> dict[str, Any]:
    name = f"gpu-{index:04d}"
    labels = {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/cuda.driver.minor": "105",
        "nvidia.com/cuda.driver.rev": "08",
        "nvidia.com/cuda.runtime.major": "13",
        "nvidia.com/cuda.runtime.minor": "0",
        "kubernetes.io/hostname": name,
        "topology.dsx.run/rack": f"rack-{index // 18:03d}",
    }
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}"},
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {
                "osImage": "Ubuntu 24.04.3 LTS",
                "kernelVersion": "6.8.0-1028-aws",
                "kubeletVersion": "v1.34.1",
            },
        },
    }


def _pod(namespace: str, name: str, node: str, owner: tuple[str, str]) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": owner[1]},
            "ownerReferences": [{"kind": owner[0], "name": owner[1]}],
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": True, "state": {"running": {}}}]},
    }


def _workload(kind: str, namespace: str, name: str, image: str) -> dict[str, Any]:
    status = (
        {"desiredNumberScheduled": NODES, "numberReady": NODES}
        if kind == "DaemonSet"
        else {"readyReplicas": 1, "availableReplicas": 1}
    )
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"image": image}]}},
        },
        "status": status,
    }


def synthetic_cluster(target: recipe_model.Recipe) -> FakeClusterReader:
    reader = FakeClusterReader(version="v1.34.1")
    reader.add(*(_node(i) for i in range(NODES)))
    for component in target.component_refs:
        image = f"registry.example/{component.name}:{component.version}"
        if component.type is recipe_model.ComponentType.HELM:
            record = helm_storage.build_release(
                name=component.name,
                namespace=component.namespace,
                chart=component.chart,
                version=component.version,
                values=component.values,
            )
            reader.add(helm_storage.encode_secret(record))
        for check in component.health_check_asserts:
            if check.kind.value in ("Deployment", "StatefulSet", "DaemonSet"):
                reader.add(_workload(check.kind.value, check.namespace, check.name, image))
            elif check.kind.value == "CustomResourceDefinition":
                established = {"conditions": [{"type": "Established", "status": "True"}]}
                reader.add({"kind": check.kind.value, "metadata": {"name": check.name}, "status": established})
        extra = f"{component.name}-extra"
        reader.add(_workload("Deployment", component.namespace, extra, image))
        reader.add(_pod(component.namespace, f"{extra}-0", "gpu-0000", ("ReplicaSet", extra)))
    plugin = "nvidia-device-plugin-daemonset"
    namespace = target.component("gpu-operator").namespace
    for i in range(NODES):
        reader.add(_pod(namespace, f"{plugin}-{i:04d}", f"gpu-{i:04d}", ("DaemonSet", plugin)))
    return reader


def _median_ms(action: Callable[[], object], runs: int = RUNS) -> float:
    action()  # warm
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _dsx_command() -> list[str]:
    script = Path(sys.executable).with_name("dsx")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dsx"]


def _line(label: str, value: str) -> None:
    print(f"{label:<58}{value}")


def main() -> None:
    target = resolve.resolve(criteria_model.Criteria(**QUERY), catalog.load()).with_digest()
    reader = synthetic_cluster(target)
    snap = cluster_snapshot.collect(reader, generator="dsx/bench", captured_at="2026-01-01T00:00:00Z")
    assert len(snap.gpu_nodes) == NODES
    phases = list(results.PHASE_ORDER)

    def live() -> results.Report:
        return run.validate(target, snap, phases=phases, reader=reader, generator="dsx/bench")

    def offline() -> results.Report:
        return run.validate(target, snap, phases=phases, generator="dsx/bench")

    assert not live().failed, [r.message for r in live().results if r.status is results.Status.FAILED]
    objects, components = len(reader.objects), len(target.component_refs)
    print(f"  synthetic cluster: {NODES} H100 nodes, {objects} API objects, {components} components")
    collect = _median_ms(lambda: cluster_snapshot.collect(reader, generator="dsx/bench"))
    _line(f"cluster snapshot collection, median of {RUNS}:", f"{collect:8.1f} ms")
    _line(f"validate, all phases, live objects, median of {RUNS}:", f"{_median_ms(live):8.1f} ms")
    _line(f"validate, all phases, snapshot only, median of {RUNS}:", f"{_median_ms(offline):8.1f} ms")
    _line(
        f"diff recipe vs snapshot, median of {RUNS}:",
        f"{_median_ms(lambda: drift.recipe_vs_snapshot(target, snap)):8.1f} ms",
    )
    _line(
        f"diff snapshot vs snapshot, median of {RUNS}:",
        f"{_median_ms(lambda: drift.snapshot_vs_snapshot(snap, snap)):8.1f} ms",
    )
    with tempfile.TemporaryDirectory() as folder:
        recipe_file, snapshot_file = Path(folder) / "r.yaml", Path(folder) / "s.yaml"
        recipe_file.write_text(serialization.dump_yaml(target.to_dict()))
        snapshot_file.write_text(serialization.dump_yaml(snap.to_dict()))
        command = [*_dsx_command(), "validate", "--recipe", str(recipe_file), "--snapshot", str(snapshot_file)]
        command += ["--output", str(Path(folder) / "report.json")]

        def process() -> None:
            subprocess.run(command, check=True, capture_output=True)

        size = snapshot_file.stat().st_size / 1e6
        _line(
            f"`dsx validate --snapshot` process ({size:.1f} MB YAML), median of {PROCESS_RUNS}:",
            f"{_median_ms(process, PROCESS_RUNS):8.1f} ms",
        )
        print("  command: dsx validate --recipe r.yaml --snapshot s.yaml --output report.json")
    print(f"  load average while measuring: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
