"""Area of concern: the formats read since issue 30 hold up under the dress real logs put on them.
Each property starts from a real line (tests/data; sources in the folders' READMEs) and generates
variants of prefix, spacing, order and interleaved or elided lines; the values the line states
must come out unchanged, and an SXid report must keep exactly the verdicts it states."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsx.certify.parsing import nccl, profiles, training
from dsx.health.parsing import xid

DATA = Path(__file__).resolve().parents[3] / "data"

KERNEL_PREFIXES = st.sampled_from(
    [
        "",
        "[...] ",
        "[ 4711.123456] ",
        "kernel: ",
        "Dec  3 06:00:00 gpu-node-7 kernel: ",
        "kern  :err   : 2025-01-25T10:34:54,859532+00:00 ",
        "[Thu Dec  3 06:00:00 2026] ",
    ]
)
NOISE = st.sampled_from(
    [
        "eth0: link up",
        "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
        "NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b",
        "...",
        "systemd[1]: Started Session 4 of user root.",
    ]
)


def report_lines(fatal: bool) -> list[str]:
    """The Fabric Manager guide's report, its `[...]` prefix removed (the variants put one back)."""
    text = (DATA / "xid" / "sxid-reports.txt").read_text(encoding="utf-8").split("# report: ")[1]
    lines = [line.removeprefix("[...] ") for line in text.splitlines()[1:]]
    if fatal:
        lines = [line.replace("Non-fatal", "Fatal").replace("Severity 0", "Severity 1") for line in lines]
    return lines


@settings(deadline=None, max_examples=60)
@given(
    fatal=st.booleans(),
    order=st.permutations([0, 1, 2]),
    prefix=KERNEL_PREFIXES,
    noise=st.lists(NOISE, max_size=6),
    gaps=st.lists(st.integers(0, 2), min_size=3, max_size=3),
)
def test_an_sxid_report_keeps_its_one_verdict_in_any_dress(
    fatal: bool, order: list[int], prefix: str, noise: list[str], gaps: list[int]
) -> None:
    lines = report_lines(fatal)
    text: list[str] = []
    spare = iter(noise)
    for index, gap in zip(order, gaps, strict=True):
        text += [next(spare, "eth0: link up") for _ in range(gap)]
        text.append(prefix + lines[index])
    records = [r for r in xid.parse_text("\n".join(text)) if r.code == 28006]
    assert sum(r.is_fatal for r in records) == (1 if fatal else 0)
    assert len(records) <= 2  # the verdict's record, and a Data line's when it opened the report
    assert sum(1 for r in records if not r.continuation or r.stated_severity is not None) == 1


@settings(deadline=None, max_examples=60)
@given(
    prefix=KERNEL_PREFIXES,
    instance=st.integers(0, 99),
    compute=st.none() | st.integers(0, 99),
    pad=st.integers(0, 8),
)
def test_a_mig_xid_keeps_its_gpu_and_instance(prefix: str, instance: int, compute: int | None, pad: int) -> None:
    where = f"PCI:0000:01:00 GPU-I:{instance:02d}" + (f" GPU-CI:{compute:02d}" if compute is not None else "")
    line = f"{prefix}NVRM: Xid ({where}): 94, pid=7194,{' ' * pad}name=python3, Contained: CE User Channel (0x9)."
    record = xid.parse_line(line)
    assert record is not None
    assert (record.code, record.pci_bdf, record.gpu_instance, record.compute_instance) == (
        94,
        "0000:01:00.0",
        instance,
        compute,
    )
    assert (record.pid, record.process_name) == (7194, "python3")
    assert record.message.startswith("Contained: CE User Channel")


TRAINING_LINES = {
    "nanogpt": ("iter 10: loss 3.2202, time 893.76ms, mfu 16.68%", 10, {"step_time_seconds": 0.89376}),
    "maxtext": (
        "completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, "
        "total_weights: 196608, loss: 10.374",
        9,
        {"step_time_seconds": 5.667, "tflops_per_gpu": 134.924},
    ),
    "gpt-neox": (
        " samples/sec: 7.799 | iteration       34/   10000 | elapsed time per iteration (ms): 4103.1 | "
        "learning rate: 2.111E-06 | approx flops per GPU: 112.9TFLOPS | lm_loss: 1.118665E+01 |",
        34,
        {"step_time_seconds": 4.1031, "tflops_per_gpu": 112.9, "loss": 11.18665},
    ),
    "deepspeed": (
        "[2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48609168106144, "
        "MemAllocated=0.26GB, MaxMemAllocated=9.02GB",
        40,
        {"samples_per_second": 83.48609168106144},
    ),
}
LOG_PREFIXES = st.sampled_from(["", "[rank0]: ", "[default0]:", "0: ", "I1203 06:00:00.000000 7 train.py:42] "])


@settings(deadline=None, max_examples=80)
@given(
    name=st.sampled_from(sorted(TRAINING_LINES)),
    prefix=LOG_PREFIXES,
    trailing=st.sampled_from(["", " ", "\t", "\r"]),
    elided=st.booleans(),
)
def test_a_profiles_real_line_reads_the_same_behind_prefixes_and_elisions(
    name: str, prefix: str, trailing: str, elided: bool
) -> None:
    line, step, values = TRAINING_LINES[name]
    if name == "deepspeed" and prefix:
        prefix = ""  # its timestamp must open the line (the profile's timestamp regex is anchored)
    text = "\n".join(["...", prefix + line + trailing] if elided else [prefix + line + trailing])
    run = training.parse(text, profiles.load(name))
    (read,) = run.steps
    assert read.step == step
    for field, value in values.items():
        assert read.value(field) == value, field


@settings(deadline=None, max_examples=40)
@given(leading=st.lists(st.sampled_from(["host", "rank", "node", "gpu"]), min_size=1, max_size=3, unique=True))
def test_columns_before_size_do_not_change_the_rows(leading: list[str]) -> None:
    header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"
    row = "  268435456  67108864  float  sum  -1  2000.0  134.22  251.66  0  1990.0  134.89  252.92  0"
    plain = nccl.parse(f"{header}\n{row}\n").tables[0].rows
    wide = (
        nccl.parse(
            "#  "
            + "  ".join(leading)
            + header.removeprefix("#")
            + "\n"
            + "  "
            + "  ".join(f"x{i}" for i in range(len(leading)))
            + row
            + "\n"
        )
        .tables[0]
        .rows
    )
    assert [(r.size_bytes, r.out_of_place, r.in_place) for r in wide] == [
        (r.size_bytes, r.out_of_place, r.in_place) for r in plain
    ]
