"""Area of concern: garbage never crashes the kernel-log, nvidia-smi and dcgmi readers; what they
cannot read is a clear BadInputError, and what they return serialises to strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsx.errors import BadInputError
from dsx.health.parsing import dcgm_diag, gpu_reports, xid

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
    # NVLink5, lost-GPU and banner paths
    "149,",
    "NETIR_LINK_EVT",
    "RLW_RXPIPE",
    "Nonfatal",
    "XC0 i0",
    "Link",
    "Link 09",
    "-1",
    "(0x025525c6",
    "0x00000040)",
    "[0x0000000a]",
    "0x" + "f" * 40,
    "NVRM: The NVIDIA GPU 0000:b3:00.0",
    "(PCI ID: 10de:20b0) installed in this system has",
    "fallen off the bus and is not responding to commands.",
    "NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)",
    "rm_init_adapter(0) failed",
    "The NVIDIA probe routine failed for 99999999 device(s).",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
    "575.57.08",
    "570.124.06",
    "99999.99999.99999",
    "\n",
]
line_of_tokens = st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join)
WORKBOOK_LINES = [
    "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 09 (0x025525c6 0x00000000 0x0)",
    "NVRM: Xid (PCI:0000:1b:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 02 (0x000004c2 0x00000001)",
    "NVRM: Xid (PCI:0000:00:1e): 149, NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x0000000a]",
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has",
    "[ 1843.308146] NVRM: fallen off the bus and is not responding to commands.",
    "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build",
    "nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 20034, Fatal, Link 44 LTSSM Fault Up",
]
mutated = st.tuples(
    st.sampled_from(KERNEL_LINES + REPORT_LINES + WORKBOOK_LINES), st.integers(0, 160), st.text(max_size=6)
).map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :])
any_line = st.one_of(st.text(max_size=120), line_of_tokens, mutated)
texts = st.lists(any_line, max_size=30).map("\n".join)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


DRIVERS = st.sampled_from(
    [None, xid.parse_driver_version("570.124.06", "configuration"), xid.parse_driver_version("575", "node-label")]
)


@SETTINGS
@given(texts, DRIVERS)
def test_xid_parser_never_crashes(text: str, driver: xid.DriverVersion | None) -> None:
    records = xid.parse_text(text, driver=driver)
    json.dumps([r.to_dict() for r in records], default=str, allow_nan=False)
    for record in records:
        assert record.is_fatal == (record.recommended_action.name != "NONE")
        assert record.error_code
        if record.verdict.immediate_action in ("RESTART_APP", "IGNORE"):
            assert not record.is_fatal
        decode = record.verdict.decode
        if decode is not None:
            assert decode.matched or decode.note  # never a silent outcome
        assert record.lines >= 1 and record.line_number >= 1


@pytest.mark.parametrize(
    "line",
    [
        "NVRM: Xid (PCI:0000:1b:00): 149, A B " + "Link " * 100_000,
        "NVRM: Xid (PCI:0000:1b:00): 149, A B" + " " * 200_000 + "Link",
        "NVRM: The NVIDIA GPU 0000:b3:00.0 " * 20_000,
        "NVRM: GPU " * 50_000 + "has fallen off the bus",
        "NVRM: Xid (" + "(" * 200_000,
        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 1, " + "link " * 100_000,
        "kern  :warn  : " * 20_000 + "NVRM: Xid (PCI:0000:01:00): 31, x",
    ],
)
@pytest.mark.timeout(60)  # quadratic backtracking on these takes many minutes; linear parsing well under a second
def test_adversarial_lines_parse_in_linear_time(line: str) -> None:
    records = xid.parse_text(line + "\n" + line)
    assert all(record.line_number in (1, 2) for record in records)


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
        report = dcgm_diag.parse_diag(text)
    except BadInputError:
        return
    json.dumps(report.to_dict(), allow_nan=False)
    json.dumps([f.to_dict() for f in report.findings()], allow_nan=False)
