"""How many node PATCHes per second a cluster's apiserver takes: the ceiling under a mass cordon.

Each cordon is one PATCH of a Node, so no sentinel can cordon faster than the apiserver accepts
node writes. This writes one annotation (`bench.dsx.run/probe`) on N distinct nodes from T
threads, each with its own client, and prints the rate and the latency percentiles. Point it at
a `dsx sim` cluster (it changes the nodes it touches; `dsx sim down` throws them away).

Run: python hack/apiserver-patch-rate.py KUBECONFIG [--nodes 640] [--threads 32]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from dsx.kube.client import KubeClient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig", type=Path)
    parser.add_argument("--nodes", type=int, default=640)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()
    with KubeClient(args.kubeconfig) as client:
        names = sorted(n["metadata"]["name"] for n in client.list_nodes())[: args.nodes]
    latencies: list[float] = []
    lock = threading.Lock()

    def patch(chunk: list[str]) -> None:
        with KubeClient(args.kubeconfig) as client:
            for name in chunk:
                started = time.monotonic()
                probe = {"metadata": {"annotations": {"bench.dsx.run/probe": str(time.time())}}}
                client.patch("v1", "Node", name, probe)
                with lock:
                    latencies.append(time.monotonic() - started)

    threads = [threading.Thread(target=patch, args=(names[i :: args.threads],)) for i in range(args.threads)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"{len(latencies)} node PATCHes from {args.threads} threads in {wall:.1f} s = {len(latencies) / wall:.0f}/s;"
        f" latency p50 {p50 * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms"
        f" (load {' '.join(load)})"
    )


if __name__ == "__main__":
    main()
