"""Parser speed: kernel-log Xid lines, nccl-tests output and training logs, in lines per second.

Why it matters: the kernel-log monitor reads every line a node's kernel writes (Xid storms reach
hundreds of thousands of lines; NVSentinel measured 800k repeats of Xid 95 on one node), and the
certify engine re-reads whole launcher logs. Inputs are the real samples in tests/data, repeated;
the dmesg mix puts one Xid line among twenty ordinary kernel lines, as real logs are mostly noise.
Hostile lines: the slowest of several 80 KB lines crafted against careless patterns (long digit
runs, repeated markers, a long prefix, an NVLink5 message without its link) must parse in under
0.5 s (issue 14: a quadratic parser took 52 s on one, delaying every node's fault detection).
Prints the median of several runs. Run with `make bench` or `python bench/bench_parsers.py`.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dsx.certify.parsing import nccl, training
from dsx.health.parsing import xid

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
RUNS = 5
NOISE = [
    "[ 1234.567890] eth0: Link is Up - 100Gbps/Full - flow control off",
    "[ 1234.600000] EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode",
    '[ 1234.700000] audit: type=1400 audit(1700000000.000:42): apparmor="STATUS" operation="profile_load"',
    "[ 1234.800000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
]


def _lines_per_second(parse: Callable[[str], object], text: str) -> float:
    count = text.count("\n") + 1
    parse(text)  # warm caches (catalog, profiles, regexes)
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        parse(text)
        samples.append(time.perf_counter() - start)
    return count / statistics.median(samples)


HOSTILE_BUDGET_SECONDS = 0.5


def crafted_lines(kilobytes: int = 80) -> dict[str, str]:
    """Kernel-log lines of about `kilobytes` KB built to make a careless pattern backtrack."""
    n = kilobytes * 1000
    return {
        "digits after the code": "NVRM: Xid (PCI:0000:01:00): 79" + "9" * n,
        "NVLink5 message without a link": "NVRM: Xid (PCI:0000:01:00): 145, " + "RLW x " * (n // 6),
        "repeated markers": "NVRM: Xid (" * (n // 11),
        "SXid after long words": ("w" * 63 + " ") * (n // 64) + "SXid (PCI:0000:01:00): 12028",
        "prefix of hosts": "h " * (n // 2) + "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1",
        "pid field": "NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=" + "," * n,
        "fallen off the bus": "NVRM: " + "GPU " * (n // 4) + "has fallen off the bus.",
        "multi-line opener": "NVRM: The NVIDIA GPU " + "0000:01:00.0 " * (n // 13),
    }


def crafted_workload_lines(kilobytes: int = 80) -> dict[str, tuple[str, str]]:
    """Workload-output lines (reader, line) of about `kilobytes` KB against careless patterns: the
    training profiles' gaps between two markers and nccl-tests' device line (issue 29 measured a
    16 KB NeMo line at 14.5 s and a 60,000-space device line at 13 s before they were bounded)."""
    n = kilobytes * 1000
    return {
        "nemo epochs without a bar": ("training", "Epoch 0:" * (n // 8)),
        "nemo bar without a count": ("training", "Epoch 0: 50%|" + "|" * n),
        "global step without saving": ("training", "global step 1: " * (n // 15)),
        "checkpoint without iteration": ("training", "successfully loaded checkpoint from /x " * (n // 39)),
        "save without duration": ("training", "Global Checkpoint Save : Rank: 0 : Iteration: 1 :" * (n // 50)),
        "finished saving without seconds": ("training", "Finished saving the checkpoint " * (n // 31)),
        "iteration markers": ("training", "iteration 1/1 " * (n // 14)),
        "device name of spaces": ("nccl", "#  Rank  0 Pid 1 on h device  0 [0x1b] NVIDIA" + " " * n + "H100 x"),
        "bandwidth markers": ("nccl", "# Avg bus bandwidth : " * (n // 22)),
    }


def _seconds_per_line(line: str) -> float:
    samples = []
    for _ in range(RUNS):
        reader = xid.KernelLogReader()
        start = time.perf_counter()
        reader.feed(line)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _sample(folder: str, name: str) -> str:
    return (DATA / folder / name).read_text(encoding="utf-8")


def main() -> None:
    kernel = [line for line in _sample("xid", "kernel-lines.txt").split("\n") if line]
    xid_only = "\n".join(kernel * 2000)
    mixed_lines = []
    for index in range(40000):
        mixed_lines.append(kernel[index % len(kernel)] if index % 20 == 0 else NOISE[index % len(NOISE)])
    mixed = "\n".join(mixed_lines)
    nccl_log = "\n".join([_sample("nccl", "01-allreduce-h100-2node-gcp-a3mega.log")] * 500)
    nccl_prefixed = "\n".join(f"2026-02-16T10:00:04.000000000Z [1,0]<stdout>:{line}" for line in nccl_log.split("\n"))
    megatron = "\n".join([_sample("training", "01-megatron-lm-mixtral8x7b-16xH100.log")] * 3000)

    results = [
        ("xid: Xid/SXid lines only", _lines_per_second(xid.parse_text, xid_only)),
        ("xid: dmesg mix, 1 Xid line in 20", _lines_per_second(xid.parse_text, mixed)),
        ("nccl: a3mega log x500", _lines_per_second(nccl.parse, nccl_log)),
        ("nccl: same with kubelet + mpirun prefixes", _lines_per_second(nccl.parse, nccl_prefixed)),
        ("training: megatron x3000 (profile detected)", _lines_per_second(training.parse, megatron)),
    ]
    print(f"command: {Path(sys.executable).name} bench/bench_parsers.py  (median of {RUNS} runs)")
    width = max(len(name) for name, _ in results)
    for name, rate in results:
        print(f"  {name:<{width}}  {rate:>12,.0f} lines/s")
    hostile = {name: _seconds_per_line(line) for name, line in crafted_lines(80).items()}
    worst = max(hostile, key=lambda name: hostile[name])
    verdict = "ok" if hostile[worst] < HOSTILE_BUDGET_SECONDS else "OVER BUDGET"
    print(
        f"  xid: slowest 80 KB crafted line ({worst})  {hostile[worst] * 1000:.2f} ms"
        f"  (budget {HOSTILE_BUDGET_SECONDS * 1000:.0f} ms: {verdict})"
    )
    readers = {"training": training.parse, "nccl": nccl.parse}
    for reader in readers:
        timed = {
            name: _seconds_to_read(readers[kind], line)
            for name, (kind, line) in crafted_workload_lines(80).items()
            if kind == reader
        }
        worst = max(timed, key=lambda name: timed[name])
        verdict = "ok" if timed[worst] < HOSTILE_BUDGET_SECONDS else "OVER BUDGET"
        print(
            f"  {reader}: slowest 80 KB crafted line ({worst})  {timed[worst] * 1000:.2f} ms"
            f"  (budget {HOSTILE_BUDGET_SECONDS * 1000:.0f} ms: {verdict})"
        )


def _seconds_to_read(parse: Callable[[str], object], line: str) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        parse(line)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


if __name__ == "__main__":
    main()
