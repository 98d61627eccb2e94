"""Area of concern: garbage never crashes the kernel-log, nvidia-smi and dcgmi readers; what they
cannot read is a clear BadInputError, and what they return serialises to strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsx.errors import BadInputError
from dsx.health import gpu_reports, xid

DATA = Path(__file__).resolve().parents[3] / "data"
KERNEL_LINES = (DATA / "xid" / "kernel-lines.txt").read_text(encoding="utf-8").split("\n")
REPORT_LINES = [
    line
    for folder in ("nvidia-smi", "dcgm")
    for path in sorted((DATA / folder).iterdir())
    if path.name != "README.md"
    for line in path.read_text(encoding="utf-8").split("\n")
]
TOKENS = [
    "NVRM:",
    "Xid",
    "SXid",
    "(PCI:",
    "(PCI:...)",
    "0000:01:00",
    "):",
    "79,",
    "154,",
    "pid=",
    "'<unknown>'",
    "name=",
    ", ",
    "to 0x4",
    "(Drain and Reset)",
    "Non-fatal",
    "Fatal",
    "GPU has fallen off the bus.",
    "kernel:",
    "[123.456]",
    "[Fri Aug 30 11:43:14 2024]",
    "kern  :warn  :",
    "2025-13-45T99:99:99,1+00:00",
    "caused by previous Xid",
    "99999999999999999999",
    "link",
    "²",
    ":",
    "|",
    "+---+",
    "Pass",
    "Fail - All",
    "Warning",
    "{",
    "}",
    '"status"',
    '"name"',
    '"gpu_id"',
    "<",
    ">",
    "GPU 00000000:10:1C.0",
    "Pending",
    "Yes",
    "N/A",
    "Active",
]
line_of_tokens = st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join)
mutated = st.tuples(st.sampled_from(KERNEL_LINES + REPORT_LINES), st.integers(0, 160), st.text(max_size=6)).map(
    lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
)
any_line = st.one_of(st.text(max_size=120), line_of_tokens, mutated)
texts = st.lists(any_line, max_size=30).map("\n".join)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(texts)
def test_xid_parser_never_crashes(text: str) -> None:
    records = xid.parse_text(text)
    json.dumps([r.to_dict() for r in records], default=str, allow_nan=False)
    for record in records:
        assert record.family in (xid.Family.XID, xid.Family.SXID)
        assert record.is_fatal or record.recommended_action.name == "NONE"


@SETTINGS
@given(texts)
def test_smi_reader_never_crashes(text: str) -> None:
    try:
        report = gpu_reports.parse_smi(text)
    except BadInputError:
        return
    json.dumps([f.to_dict() for f in report.findings()], allow_nan=False)


@SETTINGS
@given(texts)
def test_diag_reader_never_crashes(text: str) -> None:
    try:
        report = gpu_reports.parse_diag(text)
    except BadInputError:
        return
    json.dumps(report.to_dict(), allow_nan=False)
    json.dumps([f.to_dict() for f in report.findings()], allow_nan=False)
