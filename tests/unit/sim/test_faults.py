"""Area of concern: fault names parse to the documented list, and simulated kernel lines have
the shape of real driver output (tests/data/sim/kernel-lines.txt)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest

from dsx import errors
from dsx.sim import faults, profiles

WHEN = datetime.datetime(2026, 11, 29, 20, 48, 48, 123456, tzinfo=datetime.UTC)
# the `dmesg --decode --time-format=iso` lines of the real samples (line 6: Xid 13, line 12: SXid 12028)
REAL_XID = re.compile(r"^kern  :warn  : (\S+) NVRM: Xid \(PCI:([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})\): (\d+), (.*)$")
REAL_SXID = re.compile(r"^kern  :err   : (\S+) nvidia-nvswitch(\d+): SXid \(PCI:([0-9a-f:.]+)\): (\d+), (.*)$")


def test_patterns_match_the_real_samples(testdata: Path) -> None:
    lines = (testdata / "sim" / "kernel-lines.txt").read_text().splitlines()
    assert REAL_XID.match(lines[5]).group(3) == "13"  # type: ignore[union-attr]
    assert REAL_SXID.match(lines[11]).group(4) == "12028"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("not-ready", faults.Fault(faults.FaultKind.NOT_READY)),
        ("ready", faults.Fault(faults.FaultKind.READY)),
        ("xid79", faults.Fault(faults.FaultKind.XID, code=79)),
        ("xid:48", faults.Fault(faults.FaultKind.XID, code=48)),
        ("SXID20034", faults.Fault(faults.FaultKind.SXID, code=20034)),
        (
            "condition:GpuHealthy=False",
            faults.Fault(faults.FaultKind.CONDITION, condition_type="GpuHealthy", condition_status="False"),
        ),
        (
            "condition:NVLinkHealthy=Unknown:LinkDown",
            faults.Fault(
                faults.FaultKind.CONDITION,
                condition_type="NVLinkHealthy",
                condition_status="Unknown",
                reason="LinkDown",
            ),
        ),
    ],
)
def test_fault_forms(text: str, expected: faults.Fault) -> None:
    assert faults.parse(text) == expected


@pytest.mark.parametrize("text", ["", "xid", "xid:abc", "condition:GpuHealthy=false", "condition:=True", "reboot"])
def test_unknown_faults_list_the_accepted_forms(text: str) -> None:
    with pytest.raises(errors.BadInputError, match="allowed values: not-ready, ready, condition:TYPE"):
        faults.parse(text)


def test_xid_line_has_the_real_shape() -> None:
    line = faults.kernel_line(faults.parse("xid79"), profiles.accelerator("h100"), gpu=7, when=WHEN)
    match = REAL_XID.match(line)
    assert match is not None
    assert match.groups() == (
        "2026-11-29T20:48:48,123456+00:00",
        "0000:db:00",
        "79",
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    )


def test_gb200_xids_name_the_grace_blackwell_pci_domains() -> None:
    line = faults.kernel_line(faults.parse("xid:154"), profiles.accelerator("gb200"), gpu=1, when=WHEN)
    assert "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1" in line


def test_workload_xids_name_a_process_and_unknown_codes_get_a_generic_text() -> None:
    board = profiles.accelerator("a100")
    assert "pid=48213, name=python3," in faults.kernel_line(faults.parse("xid13"), board, gpu=0, when=WHEN)
    assert faults.kernel_line(faults.parse("xid:999"), board, gpu=0, when=WHEN).endswith(
        "999, pid='<unknown>', name=<unknown>, Ch 00000008"
    )


def test_sxid_line_has_the_real_shape() -> None:
    line = faults.kernel_line(faults.parse("sxid:12028"), profiles.accelerator("h100"), gpu=5, when=WHEN)
    match = REAL_SXID.match(line)
    assert match is not None
    assert match.group(2) == "1" and match.group(3) == "0000:06:00.0"
    assert match.group(5).startswith("Data {0x000001c0, ")


def test_gpu_index_and_nvswitch_presence_are_checked() -> None:
    with pytest.raises(errors.BadInputError, match="gpu: 8 is out of range"):
        faults.kernel_line(faults.parse("xid79"), profiles.accelerator("h100"), gpu=8, when=WHEN)
    with pytest.raises(errors.BadInputError, match="no NVSwitch"):
        faults.kernel_line(faults.parse("sxid:20034"), profiles.accelerator("l40s"), gpu=0, when=WHEN)
