"""Area of concern: every kernel-log dress of an Xid/SXid line reads to the code and PCI address
of sources.tsv, with a verdict the catalog supports; bursts collapse to one record per window."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsx.health.parsing import xid
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
    if record.code == 154:
        recovery = CATALOG.recovery_action(record.message)
        assert recovery is not None
        assert record.recommended_action is recovery.action
    elif record.continuation:  # an SXid report's Severity line states it; a Data line states none
        assert record.is_fatal == (record.stated_severity is not None and record.stated_severity >= 1)
    elif record.family is xid.Family.SXID:  # without a Fatal/Non-fatal word the NVS class decides
        assert record.is_fatal == (entry.nvs_class == "FATAL")
    else:
        assert record.recommended_action is bucket_action
    assert record.is_fatal == (record.recommended_action is not RecommendedAction.NONE)
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
        ("[ 269.516977] NVRM: GPU at 0000:01:00.0 has fallen off the bus.", "0000:01:00.0"),
        (
            "NVRM: The NVIDIA GPU 0000:05:00.0 installed in this system has fallen off the bus and is not responding"
            " to commands.",
            "0000:05:00.0",
        ),
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
    assert record.verdict.in_catalog and record.verdict.immediate_action == "IGNORE"
    assert not record.is_fatal and record.recommended_action is RecommendedAction.NONE


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
        # NVLink5 lines whose IntrInfo selects no decode row: the word decides, and the record says why
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


# --- lost GPUs without an Xid code ----------------------------------------------------------------

FALLEN_TWO_LINES = (
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has\n"
    "[ 1843.308146] NVRM: fallen off the bus and is not responding to commands."
)


def test_the_fallen_off_the_bus_message_over_two_lines_is_one_fatal_restart_bm_record() -> None:
    records = xid.parse_text(FALLEN_TWO_LINES)
    assert len(records) == 1
    record = records[0]
    assert (record.pci_bdf, record.is_fatal, record.recommended_action) == (
        "0000:b3:00.0",
        True,
        RecommendedAction.RESTART_BM,
    )
    assert (record.code, record.code_inferred, record.kind, record.lines) == (79, True, "GPU_FALLEN_OFF_THE_BUS", 2)
    assert (record.line_number, record.uptime_seconds) == (1, 1843.308145)


def test_the_three_line_form_with_unprefixed_continuations_and_noise_between() -> None:
    text = (
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.400000] NVRM: GPU 0000:b3:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"
    )
    records = xid.parse_text(text)
    assert [(r.kind, r.pci_bdf, r.lines) for r in records] == [
        ("GPU_FALLEN_OFF_THE_BUS", "0000:b3:00.0", 3),
        ("RM_INIT_ADAPTER_FAILED", "0000:b3:00.0", 1),
    ]


def test_an_opener_that_is_not_closed_gives_nothing() -> None:
    text = (
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:13d8)\n"
        "NVRM: installed in this system is not supported by the\n"
        "NVRM: NVIDIA 575.57.08 driver release.\n"
        "a\nb\nc\nd\n"
        "NVRM: fallen off the bus and is not responding to commands.\n"
    )
    records = xid.parse_text(text)
    # the stale opener expired: the closing line alone still reports a lost GPU, unnamed
    assert [(r.line_number, r.pci_bdf, r.recommended_action) for r in records] == [
        (8, None, RecommendedAction.RESTART_BM)
    ]


@pytest.mark.parametrize(
    ("line", "kind", "pci", "action"),
    [
        (
            "[Sun Apr 14 12:48:42 2024] NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)",
            "RM_INIT_ADAPTER_FAILED",
            "0000:81:00.0",
            RecommendedAction.RESTART_BM,
        ),
        (
            "NVRM: GPU 0000:02:00.0: rm_init_adapter failed, device minor number 0",
            "RM_INIT_ADAPTER_FAILED",
            "0000:02:00.0",
            RecommendedAction.RESTART_BM,
        ),
        (
            "NVRM: RmInitAdapter failed! (0x30:0xffffffff:711)",
            "RM_INIT_ADAPTER_FAILED",
            None,
            RecommendedAction.RESTART_BM,
        ),
        ("NVRM: rm_init_adapter(0) failed", "RM_INIT_ADAPTER_FAILED", None, RecommendedAction.RESTART_BM),
        (
            "[ 7768.914299] NVRM: The NVIDIA probe routine failed for 1 device(s).",
            "NVIDIA_PROBE_FAILED",
            None,
            RecommendedAction.CONTACT_SUPPORT,
        ),
        (
            "NVRM: None of the NVIDIA devices were initialized.",
            "NVIDIA_PROBE_FAILED",
            None,
            RecommendedAction.CONTACT_SUPPORT,
        ),
        (
            "NVRM: None of the NVIDIA graphics adapters were initialized!",
            "NVIDIA_PROBE_FAILED",
            None,
            RecommendedAction.CONTACT_SUPPORT,
        ),
    ],
)
def test_driver_messages_that_mean_a_gpu_is_unusable(
    line: str, kind: str, pci: str | None, action: RecommendedAction
) -> None:
    record = xid.parse_line(line)
    assert record is not None
    assert (record.family, record.kind, record.error_code, record.pci_address) == (xid.Family.NVRM, kind, kind, pci)
    assert record.is_fatal and record.recommended_action is action


def test_ordinary_nvrm_lines_are_not_lost_gpus() -> None:
    text = (
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06  Wed Feb 26 01:46:36 UTC 2025\n"
        "NVRM: GPU at PCI:0000:65:00: GPU-cd57429b-a4d9-917d-72d6-1d9b6c4f6a3a\n"
        "NVRM: GPU Board Serial Number: 1234\n"
        "NVRM: A GPU crash dump has been created. If possible, please run\n"
    )
    assert xid.parse_text(text) == []


# --- SXid link numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "link"),
    [
        ("nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 20034, Fatal, Link 44 LTSSM Fault Up", 44),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error", 32),
        ("nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a}", None),
        ("SXid (PCI:0000:84:00.0): 24007, Fatal", None),
    ],
)
def test_sxids_keep_their_link_and_are_reported_without_one(line: str, link: int | None) -> None:
    record = xid.parse_line(line)
    assert record is not None and record.family is xid.Family.SXID
    assert record.nvlink == link


# --- NVLink5 (Xids 144-150) ----------------------------------------------------------------------

NETIR_V1 = "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 09 (0x025525c6 0x00000000 0x0 0x0)"
BANNER_570 = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06  Wed Feb 26 01:46:36 UTC 2025"
BANNER_575 = "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U16)"


def test_netir_link_evt_decodes_to_reset_gpu_where_the_word_alone_escalated() -> None:
    record = xid.parse_line(NETIR_V1, driver=xid.parse_driver_version("570.124.06", "configuration"))
    assert record is not None
    decode = record.verdict.decode
    assert decode is not None and decode.matched
    assert (record.recommended_action, record.verdict.immediate_action) == (
        RecommendedAction.COMPONENT_RESET,
        "RESET_GPU",
    )
    assert (decode.layout, decode.rule, decode.link, decode.driver_source) == (
        "V1",
        "NETIR_LINK_EVT/NETIR_LINK_DOWN",
        9,
        "configuration",
    )
    assert record.nvlink == 9
    assert record.verdict.investigatory_action == "INVESTIGATE_PEER_DEVICE"


def test_the_banner_beats_the_configured_version_and_picks_the_layout() -> None:
    configured = xid.parse_driver_version("570.124.06", "configuration")
    # RLW_REMAP, error status 0x40: RESET_GPU (the catalog's example); V2 IntrInfo low bits 0000100
    v2_line = "NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000040)"
    records = xid.parse_text(f"{BANNER_575}\n{v2_line}", driver=configured)
    assert len(records) == 1
    decode = records[0].verdict.decode
    assert decode is not None
    assert (decode.layout, decode.driver_version, decode.driver_source) == ("V2", "575.57.08", "kernel-log")
    assert records[0].recommended_action is RecommendedAction.COMPONENT_RESET and records[0].is_fatal
    # without the banner the configured 570 applies: the V1 layout finds no row for that IntrInfo
    alone = xid.parse_text(v2_line, driver=configured)[0]
    assert alone.verdict.decode is not None and not alone.verdict.decode.matched
    assert "no rule of the Xid 145 decode sheet" in alone.verdict.decode.note
    assert not alone.is_fatal  # the message says Nonfatal, and the record says why


def test_labels_give_the_driver_when_nothing_is_configured() -> None:
    labels = {
        "nvidia.com/cuda.driver.major": "575",
        "nvidia.com/cuda.driver.minor": "57",
        "nvidia.com/cuda.driver.rev": "08",
    }
    version = xid.resolve_driver_version(None, labels)
    assert version is not None and (version.text, version.source, version.layout) == (
        "575.57.08",
        "node-label",
        xid.Layout.V2,
    )
    configured = xid.resolve_driver_version("570.86", labels)
    assert configured is not None and (configured.source, configured.layout) == ("configuration", xid.Layout.V1)


def test_second_action_of_rlw_rxpipe() -> None:
    driver = xid.parse_driver_version("570", "configuration")
    first = "NVRM: Xid (PCI:0000:1b:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 02 (0x000000c2 0x00000001)"
    second = "NVRM: Xid (PCI:0000:1b:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 02 (0x000004c2 0x00000001)"
    one, two = (xid.parse_line(line, driver=driver) for line in (first, second))
    assert one is not None and two is not None
    assert (one.recommended_action, one.verdict.decode and one.verdict.decode.second_action) == (
        RecommendedAction.NONE,
        False,
    )
    assert (two.recommended_action, two.verdict.decode and two.verdict.decode.second_action) == (
        RecommendedAction.COMPONENT_RESET,
        True,
    )


def test_an_nvlink5_line_without_registers_says_it_could_not_be_decoded() -> None:
    record = xid.parse_line("NVRM: Xid (PCI:0000:1b:00): 147, TREX Fatal")
    assert record is not None and record.verdict.decode is not None
    assert "carries no" in record.verdict.decode.note and record.is_fatal
    assert record.recommended_action is RecommendedAction.CONTACT_SUPPORT


@pytest.mark.parametrize("text", ["57x.1", "", "1.2.3.4", "99999.1"])
def test_a_malformed_driver_version_is_a_clear_error(text: str) -> None:
    from dsx.errors import BadInputError

    with pytest.raises(BadInputError, match="driver version"):
        xid.parse_driver_version(text, "--driver-version")


# --- bounded numbers --------------------------------------------------------------------------------


def test_huge_numbers_are_bounded_at_parse() -> None:
    digits = "9" * 5000  # past Python's int-from-text limit: must never reach int()
    assert xid.parse_line(f"NVRM: Xid (PCI:0000:01:00): {digits}, boom") is None
    record = xid.parse_line(f"NVRM: Xid (PCI:0000:01:00): 45, pid={digits}, Ch 1 caused by previous Xid {digits}")
    assert record is not None and record.pid is None and record.primary_code is None
    record = xid.parse_line(f"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link {digits}")
    assert record is not None and record.nvlink is None
    assert xid.parse_line(f"NVRM: Xid (PCI:0000:1b:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 01 (0x{'f' * 5000} 0x0)")
