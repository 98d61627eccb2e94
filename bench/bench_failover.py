"""Sentinel failover: the leader is killed (SIGKILL) right after it cordoned a node; how long until
the standby acts, and does the node still reach healthy with one remediation?

Starts its own `dsx sim` cluster (6 nodes) and PostgreSQL server, then runs the scenario of
tests/integration/sentinel/failover.py `--runs` times (default 5) with client-go's default
timings (15 s lease, 10 s renew deadline, 2 s retry period), each run on a fresh store schema.

    PYTHONPATH=src:. python bench/bench_failover.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO)]


def main(argv: list[str] | None = None) -> int:
    """`bench/run.py failover` calls this with no arguments; run the file itself to pass flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    args = parser.parse_args([] if argv is None else argv)

    root = Path(tempfile.mkdtemp(prefix="dsx-bench-failover-"))
    os.environ["DSX_STATE_DIR"] = str(root / "state")  # `dsx sim inject` in the scenario finds the cluster here

    from tests.fixtures.postgres_server import fresh_schema_url, running_postgres
    from tests.integration.sentinel.failover import Timings, run_failover

    from dsx.kube.client import KubeClient
    from dsx.sim.cluster import SimCluster
    from dsx.sim.nodes import SimOptions

    timings = Timings(args.lease_duration, args.renew_deadline, args.retry_period)
    cluster = SimCluster("bench", root=root / "state" / "sim")
    status = cluster.up(SimOptions(nodes=6, accelerator="h100"), die_with_parent=True, progress=lambda _: None)
    assert status.kubeconfig is not None
    runs = []
    try:
        with running_postgres() as server, KubeClient(status.kubeconfig) as client:
            node = status.node_names[1]
            for index in range(args.runs):
                run = run_failover("bench", client, node, fresh_schema_url(server.url), root / f"run-{index}", timings)
                runs.append(run)
                print(
                    f"run {index + 1}: standby acting {run.takeover_seconds:.1f} s after the kill,"
                    f" node healthy after {run.recovered_seconds:.1f} s, remediations {run.remediations},"
                    f" states {' → '.join(run.states)}",
                    flush=True,
                )
    finally:
        cluster.down()
    summary = {
        "timings_seconds": vars(timings),
        "takeover_seconds": [round(r.takeover_seconds, 2) for r in runs],
        "takeover_median_seconds": round(statistics.median(r.takeover_seconds for r in runs), 2),
        "recovered_median_seconds": round(statistics.median(r.recovered_seconds for r in runs), 2),
        "remediations": [r.remediations for r in runs],
    }
    print(json.dumps(summary, indent=2))
    return 0 if all(r.remediations == 1 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
