"""Area of concern: `dsx sentinel report smi|dcgm FILE` prints the readers' verdicts and findings
(and, with --node, the events the sentinel would store), exits 1 on a fatal finding, 0 otherwise,
and refuses bad files with the usual codes. Data: tests/data/nvidia-smi, tests/data/dcgm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsx.cli import main as cli_main
from dsx.cli.sentinel_report_cmd import report

DATA = Path(__file__).resolve().parents[3] / "data"


def run(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(report, [*args, "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.output)


def without_header(folder: str, name: str, tmp_path: Path) -> str:
    """The sample without its `# source:` line (the collection's header, not report text)."""
    text = (DATA / folder / name).read_text(encoding="utf-8").split("\n", 1)[1]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_pending_row_remap_is_reset_required_and_exits_1(tmp_path: Path) -> None:
    code, document = run(
        "smi", without_header("nvidia-smi", "01-a100-xid63-dram-correctable-remap-pending.txt", tmp_path)
    )
    assert code == 1
    (gpu,) = document["gpus"]
    assert gpu["pciBdf"] == "0000:10:1c.0"
    assert gpu["verdicts"] == {
        "throttled": False,
        "throttleReasons": [],
        "eccUncorrectable": False,
        "rowRemapPending": True,
        "rowRemapFailed": False,
        "retiredPagesPending": False,
        "resetRequired": True,
    }
    assert gpu["ecc"]["volatileCorrectable"] == 177
    assert gpu["remappedRows"]["histogramBanks"] == {"max": 639, "high": 1, "partial": 0, "low": 0, "none": 0}
    assert {f["kind"] for f in document["findings"]} == {"ecc_correctable", "row_remap_pending"}


def test_an_idle_gpu_is_not_throttled_and_exits_0(tmp_path: Path) -> None:
    code, document = run("smi", without_header("nvidia-smi", "06-clocks-throttle-reasons-idle.txt", tmp_path))
    assert code == 0
    assert all(not g["verdicts"]["throttled"] for g in document["gpus"])
    assert document["findings"] == []


def test_xml_reports_per_gpu_verdicts_and_the_events_for_a_node() -> None:
    code, document = run("smi", str(DATA / "nvidia-smi" / "10-constructed-xml-two-gpus.xml"), "--node", "gpu-7")
    assert document["gpus"][0]["verdicts"]["throttled"] is True
    assert document["gpus"][0]["verdicts"]["throttleReasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    assert document["events"] and all(e["nodeName"] == "gpu-7" for e in document["events"])
    assert len(document["events"]) == len(document["findings"])
    assert code == (1 if any(f["isFatal"] for f in document["findings"]) else 0)


def test_a_failed_diag_exits_1_with_the_test_named(tmp_path: Path) -> None:
    code, document = run("dcgm", without_header("dcgm", "03-fail-r2-pcie-nvlink-down-a100-dcgm2.4.6.txt", tmp_path))
    assert code == 1
    assert (document["failed"], document["complete"]) == (1, False)
    assert [(r["category"], r["test"], r["status"]) for r in document["results"]] == [("Integration", "PCIe", "fail")]
    assert document["findings"][0]["recommendedAction"] == "RUN_FIELDDIAG"


def test_a_passing_diag_exits_0(tmp_path: Path) -> None:
    code, document = run("dcgm", without_header("dcgm", "01-pass-r3-deployment-dcgm3.0.4.txt", tmp_path))
    assert code == 0
    assert document["failed"] == 0 and document["passed"] > 0


def dsx(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The whole command line, `dsx sentinel report ...`: its error mapping and exit codes."""
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["sentinel", "report", *args])
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


def test_a_missing_file_exits_3_and_malformed_xml_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = dsx(capsys, "smi", str(tmp_path / "absent.txt"))
    assert (code, err.strip()) == (3, f"dsx: error: {tmp_path / 'absent.txt'}: file not found")
    bad = tmp_path / "bad.xml"
    bad.write_text("<ecc_errors><volatile>", encoding="utf-8")
    code, err = dsx(capsys, "smi", str(bad))
    assert code == 2 and f"{bad}: not well-formed nvidia-smi XML" in err
