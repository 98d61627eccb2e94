"""Local certification under a CPU hog: healthy nodes must not be flagged however busy the machine is.

Runs `dsx certify run --executor local --nodes 8` (the CLI, in a fresh process each time, no
calibration file: each run calibrates itself) N times with no fault injected, while a bounded CPU
hog of 4 × the cores spins beside it (busy-loop processes, killed after the runs), and counts
the nodes flagged FAILED. Then once more with `--inject node-5:slow`, which must flag node-5 and
only it. Prints one line per run and the totals with the machine's load.

    python bench/run.py certify_load                  # 10 fault-free runs + 1 with a slow node
    python bench/run.py certify_load --runs=3 --hog=2 # fewer runs, a 2 × cores hog
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = "nccl-all-reduce,nccl-loopback,training"
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def _run(folder: Path, index: int, inject: str | None) -> dict[str, object]:
    report = folder / f"report-{index}.json"
    argv = [sys.executable, "-m", "dsx", "certify", "run", "--executor", "local", "--nodes", "8"]
    argv += ["--categories", CATEGORIES, "--output", str(report), "--quiet"]
    if inject:
        argv += ["--inject", inject]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    took = time.monotonic() - started
    if not report.exists():
        return {
            "run": index,
            "exit": done.returncode,
            "seconds": took,
            "failed": ["(no report)"],
            "stderr": done.stderr[-500:],
        }
    document = json.loads(report.read_text())
    return {
        "run": index,
        "exit": done.returncode,
        "seconds": round(took, 1),
        "failed": document["failedNodes"],
        "reasons": sorted({n.get("reason", "") for n in document["nodeResults"] if n["status"] == "FAILED"}),
    }


def main(argv: list[str]) -> None:
    options = dict(a.removeprefix("--").split("=", 1) for a in argv if "=" in a)
    runs = int(options.get("runs", "10"))
    factor = int(options.get("hog", "4"))
    cores = os.cpu_count() or 1
    hog_seconds = 3600
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=hog_seconds)], stdout=subprocess.DEVNULL)
        for _ in range(factor * cores)
    ]
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="dsx-certify-load-") as scratch:
            folder = Path(scratch)
            for index in range(1, runs + 1):
                result = _run(folder, index, None)
                result["load1"] = round(os.getloadavg()[0], 2)
                results.append(result)
                print(json.dumps(result), flush=True)
            slow = _run(folder, runs + 1, "node-5:slow")
            slow["load1"] = round(os.getloadavg()[0], 2)
            print(json.dumps(slow), flush=True)
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
    flagged = sum(len(r["failed"]) for r in results)  # type: ignore[arg-type]
    seconds = sorted(float(r["seconds"]) for r in results)  # type: ignore[arg-type]
    median = seconds[len(seconds) // 2] if seconds else 0.0
    print(
        f"certify_load: {runs} fault-free runs of `dsx certify run --executor local --nodes 8 --categories "
        f"{CATEGORIES}` beside a {factor}x{cores}-process CPU hog: {flagged} healthy node(s) flagged; "
        f"median {median:.0f} s per run; slow-node run flagged {slow['failed']} ({slow['reasons']})"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
