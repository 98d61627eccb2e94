"""How long a fresh `dsx sim up --nodes 8` takes until every node is Ready (binaries cached).

Each round starts a new cluster in an empty state folder (new certificates, empty etcd) and
stops it afterwards, so the figure is a cold start of the control plane, not a converge.
Target: under 60 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = 5
COMMAND = ["dsx", "sim", "up", "--nodes", "8", "--accelerator", "h100", "--name", "bench"]


def _dsx(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsx", *args[1:]], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def main() -> None:
    from dsx.sim import binaries

    binaries.resolve(progress=lambda line: print(line, file=sys.stderr))  # build once, outside the timing
    seconds = []
    for _ in range(ROUNDS):
        with tempfile.TemporaryDirectory(prefix="dsx-bench-sim-") as state:
            env = {**os.environ, "DSX_STATE_DIR": state}
            started = time.perf_counter()
            up = _dsx(COMMAND, env)
            elapsed = time.perf_counter() - started
            _dsx(["dsx", "sim", "down", "--name", "bench"], env)
            if up.returncode != 0:
                raise SystemExit(f"`{' '.join(COMMAND)}` failed: {up.stderr.strip()}")
            seconds.append(elapsed)
    median = statistics.median(seconds)
    print(f"command: {' '.join(COMMAND)}  (fresh state folder each round, binaries cached)")
    print(f"rounds: {ROUNDS}; each: {', '.join(f'{s:.1f}' for s in seconds)} s")
    print(f"median ready time: {median:.1f} s (target < 60 s; ratio to target {median / 60:.2f})")


if __name__ == "__main__":
    main()
