"""Area of concern: `dsx sentinel parse FILE --format json` prints one record per Xid/SXid line of
kernel-lines.txt with the code and PCI address of sources.tsv; bad files exit 3/2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsx.cli import main as cli_main
from dsx.cli.sentinel_parse_cmd import parse

DATA = Path(__file__).resolve().parents[3] / "data" / "xid"


def test_every_kernel_line_as_a_json_record() -> None:
    result = CliRunner().invoke(parse, [str(DATA / "kernel-lines.txt"), "--format", "json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    with (DATA / "sources.tsv").open(encoding="utf-8") as handle:
        expected = list(csv.DictReader(handle, delimiter="\t"))
    assert len(records) == len(expected)
    for record, row in zip(records, expected, strict=True):
        assert record["line"] == int(row["line"])
        assert record["family"] == row["family"]
        assert record["code"] == int(row["expected_code"])
        assert (record["pciAddress"] or "") == row["expected_pci"]
        assert record["immediateAction"] == row["expected_immediate_action"]
        assert isinstance(record["isFatal"], bool)
        assert record["recommendedAction"] in {
            "NONE",
            "COMPONENT_RESET",
            "CONTACT_SUPPORT",
            "RESTART_BM",
            "RESTART_VM",
        }
        assert record["message"]


def test_table_output_and_stdin() -> None:
    text = "Sep 09 15:53:19 saturn kernel: NVRM: Xid (PCI:0000:10:00): 79, pid=0, GPU has fallen off the bus.\n"
    result = CliRunner().invoke(parse, ["-", "--format", "table"], input=text)
    assert result.exit_code == 0
    header, _rule, row = result.output.splitlines()
    assert header.split() == ["line", "family", "code", "pci", "fatal", "action", "bucket", "message"]
    assert row.split()[:7] == ["1", "XID", "79", "0000:10:00", "yes", "RESTART_BM", "RESTART_BM"]


def test_a_log_without_xids_is_an_empty_list() -> None:
    result = CliRunner().invoke(parse, ["-", "--format", "json"], input="nothing to see\n")
    assert result.exit_code == 0 and json.loads(result.output) == []


def run_dsx(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    monkeypatch.setitem(cli_main.COMMANDS, "sentinel-parse", ("dsx.cli.sentinel_parse_cmd:parse", "test"))
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["sentinel-parse", *args])
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


def test_missing_file_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_dsx(monkeypatch, capsys, "/nonexistent/kern.log")
    assert (code, err.strip()) == (3, "dsx: error: /nonexistent/kern.log: file not found")


def test_unreadable_file_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "kern.log"
    path.write_bytes(b"\xc3\x28 NVRM: Xid")
    code, err = run_dsx(monkeypatch, capsys, str(path))
    assert code == 2 and "not UTF-8 text" in err


def test_driver_version_picks_the_nvlink5_layout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = "NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000040)\n"
    result = CliRunner().invoke(parse, ["-", "--format", "json", "--driver-version", "575.57.08"], input=line)
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.output)
    assert (record["recommendedAction"], record["nvlink5Decode"]["driverSource"]) == (
        "COMPONENT_RESET",
        "configuration",
    )
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(line))
    code, err = run_dsx(monkeypatch, capsys, "-", "--driver-version", "latest")
    assert code == 2 and "--driver-version: driver version: 'latest'" in err


def test_a_table_names_lost_gpu_messages_by_their_id() -> None:
    text = "NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)\n"
    result = CliRunner().invoke(parse, ["-", "--format", "table"], input=text)
    assert result.exit_code == 0
    assert result.output.splitlines()[2].split()[:6] == [
        "1",
        "NVRM",
        "RM_INIT_ADAPTER_FAILED",
        "0000:81:00.0",
        "yes",
        "RESTART_BM",
    ]
