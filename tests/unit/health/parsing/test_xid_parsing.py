"""Area of concern: every kernel-log dress of an Xid/SXid line reads to the code and PCI address
of sources.tsv, with a verdict the catalog supports; bursts collapse to one record per window."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsx.health import xid
from dsx.model.health import RecommendedAction

DATA = Path(__file__).resolve().parents[3] / "data" / "xid"
LINES = (DATA / "kernel-lines.txt").read_text(encoding="utf-8").split("\n")
with (DATA / "sources.tsv").open(encoding="utf-8") as handle:
    SOURCES = list(csv.DictReader(handle, delimiter="\t"))
CATALOG = xid.default_catalog()


def test_every_line_is_a_record() -> None:
    records = xid.parse_text("\n".join(LINES))
    assert [r.line_number for r in records] == [int(row["line"]) for row in SOURCES]


@pytest.mark.parametrize("row", SOURCES, ids=lambda r: f"line{r['line']}-{r['family']}{r['expected_code']}")
def test_line_reads_to_sources_tsv(row: dict[str, str]) -> None:
    number = int(row["line"])
    record = xid.parse_line(LINES[number - 1], number)
    assert record is not None
    assert record.family.value == row["family"]
    assert record.code == int(row["expected_code"])
    assert (record.pci_address or "") == row["expected_pci"]
    assert record.verdict.immediate_action == row["expected_immediate_action"]
    assert record.verdict.in_catalog


@pytest.mark.parametrize("row", SOURCES, ids=lambda r: f"line{r['line']}")
def test_verdict_is_what_the_catalog_says(row: dict[str, str]) -> None:
    number = int(row["line"])
    record = xid.parse_line(LINES[number - 1], number)
    assert record is not None
    entry = CATALOG.entry(record.family, record.code)
    assert entry is not None
    bucket_action = CATALOG.bucket_actions[entry.immediate_action]
    if entry.severity is xid.Severity.FATAL:
        assert record.is_fatal and record.recommended_action is bucket_action
    elif entry.severity is xid.Severity.NONFATAL:
        assert not record.is_fatal and record.recommended_action is RecommendedAction.NONE
    elif record.code == 154:
        recovery = CATALOG.recovery_action(record.message)
        assert recovery is not None
        assert (record.is_fatal, record.recommended_action) == (recovery.fatal, recovery.action)
    else:  # SXid without a Fatal/Non-fatal word: the NVS class decides
        assert record.is_fatal == (entry.nvs_class == "FATAL")
    if entry.application_level:
        assert not record.is_fatal


@pytest.mark.parametrize(
    ("number", "recovery", "action"),
    [
        (14, "GPU Reset Required", RecommendedAction.COMPONENT_RESET),
        (16, "Drain and Reset", RecommendedAction.COMPONENT_RESET),
    ],
)
def test_xid_154_decodes_the_recovery_action(number: int, recovery: str, action: RecommendedAction) -> None:
    record = xid.parse_line(LINES[number - 1], number)
    assert record is not None
    assert record.verdict.recovery_action == recovery
    assert record.recommended_action is action and record.is_fatal


@pytest.mark.parametrize(
    ("text", "action", "fatal"),
    [
        ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", RecommendedAction.NONE, False),
        (
            "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
            RecommendedAction.RESTART_BM,
            True,
        ),
        ("GPU recovery action changed from 0x0 (None) to 0x4", RecommendedAction.COMPONENT_RESET, True),
        ("GPU recovery action changed from 0x0 (None) to 0x9 (Something New)", RecommendedAction.CONTACT_SUPPORT, True),
    ],
)
def test_xid_154_other_recovery_actions(text: str, action: RecommendedAction, fatal: bool) -> None:
    record = xid.parse_line(f"NVRM: Xid (PCI:0000:01:00): 154, {text}")
    assert record is not None
    assert (record.recommended_action, record.is_fatal) == (action, fatal)


def test_xid_45_names_its_primary_xid() -> None:
    record = xid.parse_line(LINES[16], 17)
    assert record is not None and record.primary_code == 149 and not record.is_fatal


def test_prefixes_give_time_host_and_uptime() -> None:
    by_line = {r.line_number: r for r in xid.parse_text("\n".join(LINES))}
    assert by_line[1].uptime_seconds == 31543.449443
    assert by_line[5].timestamp == datetime(2024, 8, 30, 11, 43, 14)
    assert by_line[6].timestamp == datetime(2025, 1, 21, 4, 41, 44, 283390, tzinfo=UTC)
    assert by_line[9].hostname == "saturn" and by_line[9].timestamp_text == "Sep 09 15:53:19"
    assert by_line[9].timestamp is None  # syslog time has no year
    assert by_line[14].hostname is None and by_line[14].timestamp_text == "Mar 29 15:38:59"
    assert by_line[11].device == "nvidia-nvswitch2"


def test_pid_and_process_name() -> None:
    by_line = {r.line_number: r for r in xid.parse_text("\n".join(LINES))}
    assert (by_line[3].pid, by_line[3].process_name) == (13332, "cuda_plot_k32_v")
    assert (by_line[4].pid, by_line[4].process_name) == (None, None)  # pid='<unknown>'
    assert (by_line[9].pid, by_line[9].process_name) == (0, None)
    assert (by_line[15].pid, by_line[15].process_name) == (12542, "VLLM::Worker")
    assert (by_line[1].pid, by_line[1].message[:2]) == (None, "Ch")  # old format without pid=
    assert by_line[3].message.startswith("Ch 00000010, intr 00000000. MMU Fault")


def test_redacted_address_is_absent_and_the_nvlink_is_read() -> None:
    record = xid.parse_line(LINES[17], 18)
    assert record is not None
    assert (record.pci_address, record.pci_bdf, record.nvlink) == (None, None, 11)


@pytest.mark.parametrize(
    ("line", "pci"),
    [
        ("[  228.414765] NVRM: GPU 0000:09:00.0: GPU has fallen off the bus.", "0000:09:00.0"),
        ("kernel: NVRM: GPU has fallen off the bus.", None),
        ("NVRM: GPU at PCI:0000:83:00: GPU has fallen off the bus.", "0000:83:00"),
    ],
)
def test_fallen_off_the_bus_without_a_code_is_xid_79(line: str, pci: str | None) -> None:
    record = xid.parse_line(line)
    assert record is not None
    assert (record.code, record.code_inferred, record.pci_address) == (79, True, pci)
    assert record.is_fatal and record.recommended_action is RecommendedAction.RESTART_BM


def test_old_driver_format_without_pci_prefix() -> None:
    record = xid.parse_line("NVRM: Xid (0000:03:00): 14, Channel 00000001")
    assert record is not None
    assert (record.code, record.pci_address) == (14, "0000:03:00")
    assert not record.verdict.in_catalog
    assert record.is_fatal and record.recommended_action is RecommendedAction.CONTACT_SUPPORT  # unknown: escalate


def test_process_names_with_colons_and_brackets() -> None:
    line = (
        "[6085126.134786] NVRM: Xid (PCI:0002:00:00): 79, pid=1582259, name=nvc:[driver], GPU has fallen off the bus."
    )
    record = xid.parse_line(line)
    assert record is not None
    assert (record.process_name, record.pid, record.code_inferred) == ("nvc:[driver]", 1582259, False)


@pytest.mark.parametrize(
    ("line", "fatal", "action"),
    [
        ("nvidia-nvswitch3: SXid (PCI:0000:87:00.0): 12028, Non-fatal, Link 32 egress", False, RecommendedAction.NONE),
        ("nvidia-nvswitch3: SXid (PCI:0000:87:00.0): 12028, Fatal, Link 32 egress", True, RecommendedAction.RESTART_VM),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 11004, Non-fatal, Link 3 ingress", False, RecommendedAction.NONE),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 11004, Severity 1", True, RecommendedAction.CONTACT_SUPPORT),
        ("NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x0 0x0)", False, RecommendedAction.NONE),
        (
            "NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Fatal XC0 i0 Link 00 (0x0 0x0)",
            True,
            RecommendedAction.CONTACT_SUPPORT,
        ),
    ],
)
def test_worded_severity(line: str, fatal: bool, action: RecommendedAction) -> None:
    record = xid.parse_line(line)
    assert record is not None
    assert (record.is_fatal, record.recommended_action) == (fatal, action)


def test_lines_without_xid_are_skipped() -> None:
    text = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module\nXid nothing here\nNVRM: GPU at PCI:0000:3b:00: GPU-1234\n"
    assert xid.parse_text(text) == []


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0000:01:00", "0000:01:00.0"),
        ("00000000:10:1C.0", "0000:10:1c.0"),
        ("0009:01:00", "0009:01:00.0"),
        ("0000:07:00.0", "0000:07:00.0"),
        ("3b:00.1", "0000:3b:00.1"),
        ("...", None),
        ("100000000:01:00.0", None),
    ],
)
def test_canonical_pci_address(text: str, canonical: str | None) -> None:
    assert xid.canonical_pci_address(text) == canonical


def test_to_dict_has_the_issue_fields() -> None:
    record = xid.parse_line(LINES[8], 9)
    assert record is not None
    data = record.to_dict()
    assert {k: data[k] for k in ("line", "family", "code", "pci_address", "is_fatal", "recommended_action")} == {
        "line": 9,
        "family": "XID",
        "code": 79,
        "pci_address": "0000:10:00",
        "is_fatal": True,
        "recommended_action": "RESTART_BM",
    }
    assert data["message"] == "GPU has fallen off the bus."


# --- bursts -------------------------------------------------------------------------------------

XID_95 = "NVRM: Xid (PCI:0000:{bus}:00): 95, pid=1, name=x, Uncontained: FBHUB. RST: Yes, D-RST: No"


def test_a_burst_is_one_admission_per_window() -> None:
    dedup = xid.BurstDeduplicator(window_seconds=300)
    record = xid.parse_line(XID_95.format(bus="3b"))
    assert record is not None
    decisions = [dedup.admit("node-1", record, t * 0.01) for t in range(1000)]
    assert sum(d.admitted for d in decisions) == 1
    assert decisions[-1].repeats_suppressed == 999
    later = dedup.admit("node-1", record, 301.0)
    assert later.admitted and later.repeats_suppressed == 999


def test_other_gpu_other_node_other_code_are_separate() -> None:
    dedup = xid.BurstDeduplicator(window_seconds=60)
    first = xid.parse_line(XID_95.format(bus="3b"))
    other_gpu = xid.parse_line(XID_95.format(bus="86"))
    other_code = xid.parse_line("NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE")
    assert first and other_gpu and other_code
    assert dedup.admit("n1", first, 0).admitted
    assert dedup.admit("n1", other_gpu, 1).admitted
    assert dedup.admit("n2", first, 2).admitted
    assert dedup.admit("n1", other_code, 3).admitted
    assert not dedup.admit("n1", first, 4).admitted


def test_fallen_off_the_bus_after_xid_79_is_the_same_burst() -> None:
    dedup = xid.BurstDeduplicator()
    xid_79 = xid.parse_line("NVRM: Xid (PCI:0000:83:00): 79, GPU has fallen off the bus.")
    fallen = xid.parse_line("NVRM: GPU 0000:83:00.0: GPU has fallen off the bus.")
    assert xid_79 and fallen
    assert dedup.admit("n1", xid_79, 0).admitted
    assert not dedup.admit("n1", fallen, 0.1).admitted


def test_the_deduplicator_forgets_closed_windows_to_stay_bounded() -> None:
    dedup = xid.BurstDeduplicator(window_seconds=10, max_keys=4)
    records = [xid.parse_line(XID_95.format(bus=f"{bus:02x}")) for bus in range(8)]
    for t, record in enumerate(records):
        assert record is not None
        assert dedup.admit("n1", record, t * 20).admitted
    assert len(dedup._opened) <= 4


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        xid.BurstDeduplicator(window_seconds=0)
