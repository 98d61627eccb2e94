"""Area of concern: garbage never crashes the workload-log parsers, and what they return still
serialises to strict JSON (no NaN or infinity sneaks through)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsx.certify.parsing import nccl, training

DATA = Path(__file__).resolve().parents[3] / "data"
REAL_LINES = [
    line
    for folder in ("nccl", "training")
    for path in sorted((DATA / folder).glob("*.log"))
    for line in path.read_text(encoding="utf-8").split("\n")
]
TOKENS = [
    "#",
    "size",
    "count",
    "busbw",
    "#wrong",
    "N/A",
    "nan",
    "inf",
    "-inf",
    "1e+308",
    "1e999",
    "-1",
    "0",
    "00",
    "4294967296",
    "float",
    "sum",
    "none",
    "|",
    "iteration",
    "/",
    "step",
    "loss:",
    "tps:",
    "5,856",
    "1,2,3",
    "[1,0]<stdout>:",
    "0:",
    "[rank0]:",
    "Avg bus bandwidth :",
    "Out of bounds values :",
    "FAILED",
    "OK",
    "elapsed time per iteration (ms):",
    "dt:",
    "ms",
    "s/it",
    "it/s",
    "9:07:58",
    "\r",
    "\t",
    "²",
    "٣",
    "\x1b[31m",
    "2026-02-16T10:00:04.000000000Z",
    "[2024-04-06 02:59:36]",
    "NCCL WARN",
    "Test NCCL failure",
]

line_of_tokens = st.lists(st.sampled_from(TOKENS), max_size=16).map(" ".join)
mutated_real = st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 200), st.text(max_size=8)).map(
    lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
)
any_line = st.one_of(st.text(max_size=120), line_of_tokens, mutated_real, st.sampled_from(REAL_LINES))
logs = st.lists(any_line, max_size=40).map("\n".join)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(logs)
def test_nccl_parser_never_crashes(text: str) -> None:
    log = nccl.parse(text)
    json.dumps(log.to_dict(), allow_nan=False)
    assert log.status in (nccl.Status.PASSED, nccl.Status.FAILED)


@SETTINGS
@given(logs)
def test_training_parser_never_crashes(text: str) -> None:
    run = training.parse(text)
    json.dumps(run.to_dict(), allow_nan=False)
    assert len({s.step for s in run.steps}) == len(run.steps)
