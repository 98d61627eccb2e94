"""Area of concern: `dsx sentinel parse` gives NVIDIA's action for every row of the Xid catalog
workbook: one generated kernel-log line per Xid (172) and per NVLink5 decode row (95, in the V1
layout under an R570 banner and in the V2 layout under an R575 banner, plus each second action);
and the driver's multi-line fallen-off-the-bus message is one fatal RESTART_BM record."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsx.cli.sentinel_parse_cmd import parse
from dsx.health.parsing import xid

REPO = Path(__file__).resolve().parents[4]
WORKBOOK = REPO / "tests" / "data" / "xid" / "workbook"
CATALOG = xid.default_catalog()
BANNERS = {
    xid.Layout.V1: "[ 4.100000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06  Wed Feb 26 2025",
    xid.Layout.V2: "[ 4.100000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build",
}
V1_COLUMNS = {xid.Layout.V1: "v1_intrinfo_pattern_pre_r575", xid.Layout.V2: "v2_intrinfo_pattern_r575_plus"}
SECOND_COLUMNS = {xid.Layout.V1: "v1_action2_pattern", xid.Layout.V2: "v2_action2_pattern"}


def tsv(name: str) -> list[dict[str, str]]:
    with (WORKBOOK / name).open(encoding="utf-8", newline="") as handle:
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(handle, delimiter="\t")]


def example(pattern: str) -> int:
    """A number the pattern matches: its fixed bits, free bits 0."""
    return int(pattern.replace("-", "0"), 2)


def parse_lines(lines: list[str], tmp_path: Path) -> list[dict[str, Any]]:
    log = tmp_path / "kern.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(parse, [str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    records: list[dict[str, Any]] = json.loads(result.output)
    return records


def test_every_workbook_xid_gives_the_workbooks_action(tmp_path: Path) -> None:
    rows = tsv("xids.tsv")
    lines = [
        f"[{1000 + i}.000001] NVRM: Xid (PCI:0000:3b:00): {row['code']}, pid=4242, name=python3, "
        + (
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
            if row["code"] == "154"
            else "error"
        )
        for i, row in enumerate(rows)
    ]
    records = parse_lines(lines, tmp_path)
    assert len(records) == len(rows) == 172
    for record, row in zip(records, rows, strict=True):
        bucket = row["immediate_bucket"] or CATALOG.unspecified_bucket
        assert (record["code"], record["immediateAction"], record["mnemonic"]) == (
            int(row["code"]),
            bucket,
            row["mnemonic"],
        )
        expected = "COMPONENT_RESET" if bucket == "XID_154" else CATALOG.bucket_actions[bucket].name
        assert record["recommendedAction"] == expected, row["code"]
        assert record["isFatal"] == (expected != "NONE")
        if bucket in ("RESTART_APP", "IGNORE"):
            assert not record["isFatal"]


def decode_cases() -> list[tuple[xid.Layout, int, dict[str, str], bool]]:
    rows = tsv("xid-144-150-decode.tsv")
    cases = [(layout, index, row, False) for layout in xid.Layout for index, row in enumerate(rows)]
    cases += [
        (layout, index, row, True) for layout in xid.Layout for index, row in enumerate(rows) if row["action2_bucket"]
    ]
    return sorted(cases, key=lambda case: list(xid.Layout).index(case[0]))  # grouped under each banner


def test_every_decode_row_gives_the_sheets_action_in_both_layouts(tmp_path: Path) -> None:
    cases = decode_cases()
    lines: list[str] = []
    for layout in xid.Layout:
        lines.append(BANNERS[layout])
        for case_layout, index, row, second in cases:
            if case_layout is not layout:
                continue
            pattern = row[SECOND_COLUMNS[layout] if second else V1_COLUMNS[layout]]
            status = row["error_status_hex"].split("/")[0] or "0x00000000"
            subcode = row["subcode"].split("/")[0].replace(" ", "_")
            word = "Fatal" if row["severity"].startswith(("Fatal", "Link")) else "Nonfatal"
            lines.append(
                f"[{2000 + index}.000001] NVRM: Xid (PCI:0018:01:00): {row['xid']}, pid=7, name=x, "
                f"{subcode} {word} XC0 i0 Link {index % 18:02d} (0x{example(pattern):08x} {status} 0x00000000)"
            )
    records = parse_lines(lines, tmp_path)
    assert len(records) == len(cases) == 2 * 95 + 2 * 3
    for record, (layout, index, row, second) in zip(records, cases, strict=True):
        bucket = row["action2_bucket"] if second else row["recovery_bucket"]
        decode = record["nvlink5Decode"]
        where = (layout.value, index + 2, row["subcode"], row["error_status_hex"], second)
        assert decode["matched"] and decode["layout"] == layout.value, where
        assert decode["driverSource"] == "kernel-log", where
        assert (record["immediateAction"], decode["secondAction"]) == (bucket, second), where
        assert record["recommendedAction"] == CATALOG.bucket_actions[bucket].name, where
        assert decode["investigatoryAction"] == (row["investigatory_bucket"] or None), where


@pytest.mark.parametrize(
    ("line", "bucket", "action"),
    [  # the issue's examples: the Fatal/Nonfatal word said otherwise
        (
            "NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x0)",
            "RESET_GPU",
            "COMPONENT_RESET",
        ),
        (
            "NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000082 0x00000040)",
            "RESET_GPU",
            "COMPONENT_RESET",
        ),
    ],
)
def test_the_issues_decode_examples(line: str, bucket: str, action: str, tmp_path: Path) -> None:
    (record,) = parse_lines([line], tmp_path)
    assert (record["immediateAction"], record["recommendedAction"], record["isFatal"]) == (bucket, action, True)


def test_the_multi_line_fallen_off_the_bus_message_is_one_fatal_restart_bm_record(tmp_path: Path) -> None:
    lines = [
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has",
        "[ 1843.308146] NVRM: fallen off the bus and is not responding to commands.",
    ]
    (record,) = parse_lines(lines, tmp_path)
    assert (record["pciBdf"], record["isFatal"], record["recommendedAction"], record["lines"]) == (
        "0000:b3:00.0",
        True,
        "RESTART_BM",
        2,
    )
