"""Area of concern: `dsx demo` refuses bad input before it starts anything (exit 2, one line
naming the flag and the allowed values), and its summary table names the isolated and the
remediated node."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.cli import demo_cmd
from dsx.cli.main import main


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--slow-node", "gpu-node-02"], "--slow-node and --xid-node are both gpu-node-02"),
        (["--xid-node", "gpu-node-08"], "xid-node: 'gpu-node-08' is not allowed"),
        (["--slow-node", "node-5"], "gpu-node-00"),
        (["--categories", "nccl-all-reduce,nope"], "--categories: category: 'nope' is not allowed"),
        (["--categories", ","], "--categories: give at least one category"),
    ],
)
def test_bad_input_exits_2_before_anything_starts(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert dsx("demo", "--output", str(out), *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsx: error: ") and message in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_summary_table_names_isolated_and_remediated_nodes() -> None:
    document = {
        "result": "passed",
        "durationSeconds": 185.4,
        "steps": [{"title": "certify", "status": "passed", "durationSeconds": 47.7, "detail": "blamed gpu-node-05"}],
        "isolated": [{"node": "gpu-node-05", "reason": "ThresholdViolation", "message": "busbw low"}],
        "remediated": [{"node": "gpu-node-02", "states": ["quarantined", "drained", "healthy"]}],
        "artifacts": {"report": "/x/report.html"},
    }
    text = demo_cmd.summary_table(document)
    assert "certify  passed  47.7s  blamed gpu-node-05" in text
    assert "isolated:   gpu-node-05  ThresholdViolation: busbw low" in text
    assert "remediated: gpu-node-02  quarantined → drained → healthy" in text
    assert "report:     /x/report.html" in text
    assert text.endswith("result:     PASSED in 3m05s\n")
