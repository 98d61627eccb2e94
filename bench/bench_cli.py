"""CLI start-up: whole-process wall time of `dsx recipe`, `dsx query` and `dsx bundle` (lint on).

Targets (issue 17, item 5, on the 2-core machine at load average < 1): `dsx recipe` and
`dsx query` under 0.1 s median wall, `dsx bundle` under 0.3 s. Each round runs every command
once, one after the other (paired runs: a burst of load slows the whole round, not one
command's samples), after a baseline `python -c pass` that shows what the interpreter alone
costs, and `import click, yaml`: the floor of any command on the libraries dsx writes its CLI and
YAML with. Every figure is printed with its command and the load average measured beside it; CPU
time (user + system) is printed too, as it moves less with load than wall time does.

The children run dsx as the `dsx` console script does, from the same source tree as this
file's import of `dsx`, with bytecode caching on (as any pip install has it):
PYTHONDONTWRITEBYTECODE, set in some sandboxes, would recompile every module on every run, and
the compiled files go to a temporary PYTHONPYCACHEPREFIX, not into the tree. dsx's cache is a
temporary DSX_CACHE_DIR too (other checkouts sharing ~/.cache/dsx would evict its catalog
cache mid-run; its chart cache starts empty, so lint reads the charts packaged in the catalog,
as on a fresh install). A warm-up round fills the bytecode and the parsed chart data first,
as any second run of dsx finds them (the catalog comes compiled in the package). Run with
`make bench` or `python bench/run.py cli`;
`DSX_BENCH_CLI_RUNS` changes the number of rounds (default 21). With `DSX_BENCH_AICR` naming an
`aicr` binary, its recipe, query and bundle run in the same rounds, and the CPU ratio to each is
printed against issue 33's goal (recipe and query within 1x, bundle within 2x).
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dsx

CRITERIA = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]
SELECTOR = "components.gpu-operator.values.driver.version"
TARGETS_S = {"recipe": 0.1, "query": 0.1, "bundle": 0.3}
AICR_CPU_RATIO = {"recipe": 1.0, "query": 1.0, "bundle": 2.0}
"""Issue 33's goal: dsx's median CPU time at most this many times AICR's on the same command."""
AICR_ENV = "DSX_BENCH_AICR"
"""Path of an `aicr` binary (NVIDIA/aicr, `go build -mod=vendor ./cmd/aicr`): its commands join every round."""
CONSOLE_SCRIPT = "import sys; from dsx.cli.main import main; sys.exit(main())"
"""What the `dsx` entry point of pyproject.toml runs."""


class Samples:
    """One command's runs (a plain class: bench/run.py loads this file outside sys.modules)."""

    def __init__(self, label: str, argv: list[str]) -> None:
        self.label = label
        self.argv = argv
        self.walls_s: list[float] = []
        self.cpus_s: list[float] = []
        self.loads: list[float] = []


def _rounds() -> int:
    return int(os.environ.get("DSX_BENCH_CLI_RUNS", "21"))


def _environment(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    source_root = str(Path(dsx.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["DSX_CACHE_DIR"] = str(work / "cache")
    return env


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one child process; a failed command stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"bench_cli: {' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def measure(rounds: int) -> list[Samples]:
    dsx_argv = [sys.executable, "-c", CONSOLE_SCRIPT]
    with tempfile.TemporaryDirectory(prefix="dsx-bench-cli-") as folder:
        work = Path(folder)
        env = _environment(work)
        recipe_file = work / "recipe.yaml"
        subprocess.run([*dsx_argv, "recipe", *CRITERIA, "-o", str(recipe_file)], env=env, check=True)
        commands = [
            Samples("python -c pass", [sys.executable, "-c", "pass"]),
            Samples("import click, yaml", [sys.executable, "-c", "import click, yaml"]),
            Samples("recipe", [*dsx_argv, "recipe", *CRITERIA]),
            Samples("query", [*dsx_argv, "query", *CRITERIA, "--selector", SELECTOR]),
            Samples("bundle", [*dsx_argv, "bundle", "--recipe", str(recipe_file), "--output", str(work / "bundle")]),
        ]
        aicr = os.environ.get(AICR_ENV)
        if aicr:
            aicr_recipe = work / "aicr-recipe.yaml"
            subprocess.run(
                [aicr, "recipe", *CRITERIA, "-o", str(aicr_recipe)], env=env, check=True, capture_output=True
            )
            commands += [
                Samples("aicr recipe", [aicr, "recipe", *CRITERIA]),
                Samples("aicr query", [aicr, "query", *CRITERIA, "--selector", SELECTOR]),
                Samples("aicr bundle", [aicr, "bundle", "--recipe", str(aicr_recipe), "--output", str(work / "aicr")]),
            ]
        for command in commands:  # warm-up: bytecode, page cache, catalog cache
            _run(command.argv, env, work)
        for _ in range(rounds):
            for command in commands:
                command.loads.append(os.getloadavg()[0])
                wall, cpu = _run(command.argv, env, work)
                command.walls_s.append(wall)
                command.cpus_s.append(cpu)
    return commands


def _shown(argv: list[str]) -> str:
    if argv[1:3] == ["-c", CONSOLE_SCRIPT]:
        argv = ["dsx", *argv[3:]]
    return " ".join(Path(a).name if a.startswith(tempfile.gettempdir()) else a for a in argv)


def report(commands: list[Samples]) -> None:
    rounds = len(commands[0].walls_s)
    print(f"{rounds} paired rounds on {os.cpu_count()} cpus; load = 1-minute load average before each run")
    print(f"{'':<16}{'median':>9}{'p90':>9}{'cpu':>9}{'target':>9}  {'load (median, max)':<20}")
    for command in commands:
        median = statistics.median(command.walls_s)
        target = TARGETS_S.get(command.label)
        verdict = "" if target is None else f"{target * 1000:7.0f}ms {'ok' if median < target else 'MISSED'}"
        load = f"{statistics.median(command.loads):.2f}, {max(command.loads):.2f}"
        print(
            f"{command.label:<16}{median * 1000:7.1f}ms{_p90(command.walls_s) * 1000:7.1f}ms"
            f"{statistics.median(command.cpus_s) * 1000:7.1f}ms{verdict:>12}  {load}"
        )
        print(f"  $ {_shown(command.argv)}")
    by_label = {command.label: command for command in commands}
    for label, ratio in AICR_CPU_RATIO.items():
        theirs = by_label.get(f"aicr {label}")
        if theirs is None:
            continue
        ours_cpu, their_cpu = statistics.median(by_label[label].cpus_s), statistics.median(theirs.cpus_s)
        verdict = "ok" if ours_cpu <= ratio * their_cpu else "MISSED"
        print(f"cpu {label}: dsx/aicr = {ours_cpu / their_cpu:.2f} (goal <= {ratio:.0f}x) {verdict}")
    now = os.getloadavg()
    print(f"load average now: {now[0]:.2f} {now[1]:.2f} {now[2]:.2f} (targets hold at load < 1)")


def main() -> None:
    report(measure(_rounds()))


if __name__ == "__main__":
    main()
