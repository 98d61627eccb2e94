"""Area of concern: `dsx certify parse nccl|training` prints parseable JSON with the README values
for every sample, exits 1 on a failed verdict, and 3/2 on a missing/unreadable file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsx.cli import main as cli_main
from dsx.cli.certify_parse_cmd import parse

DATA = Path(__file__).resolve().parents[3] / "data"

NCCL = {
    "01-allreduce-h100-2node-gcp-a3mega.log": (0, "all_reduce", 31, 338.82, 70.742),
    "02-allreduce-gb200-nvl72-1rack.log": (0, "all_reduce", 5, 839.16, 745.53),
    "05-alltoall-gb300-1node-oci.log": (0, "alltoall", 16, 627.69, 381.478),
    "06-allreduce-h200-1node-16G-azure-nhc.log": (0, "all_reduce", 1, 479.97, 480.11),
    "07-allgather-v100-outofbounds-FAILED.log": (1, "all_gather", 1, 129.05, 128.942),
    "11-allreduce-h100-2node-tree-low-busbw.log": (0, "all_reduce", 5, 41.31, None),
    "14-allreduce-a100-2node-p4de-srun-label-prefix.log": (0, "all_reduce", 29, 78.33, None),
}


@pytest.mark.parametrize("name", sorted(NCCL), ids=lambda n: n[:2])
def test_parse_nccl_sample_as_json(name: str) -> None:
    code, collective, rows, max_busbw, avg = NCCL[name]
    result = CliRunner().invoke(parse, ["nccl", str(DATA / "nccl" / name), "--format", "json"])
    assert result.exit_code == code, result.output
    data = json.loads(result.output)
    (table,) = data["tables"]
    assert (table["collective"], table["rowCount"], table["maxBusbwGbps"], table["avgBusbwGbps"]) == (
        collective,
        rows,
        max_busbw,
        avg,
    )
    assert data["status"] == ("failed" if code else "passed")


def test_parse_nccl_init_failure_lists_the_failure_lines() -> None:
    path = DATA / "nccl" / "08-allreduce-h100-2node-init-failure-WARN.log"
    result = CliRunner().invoke(parse, ["nccl", str(path), "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["status"] == "failed" and data["tables"] == []
    kinds = {f["kind"] for f in data["failureLines"]}
    assert kinds == {"nccl_warn", "test_failure"}


TRAINING = {
    "01-megatron-lm-mixtral8x7b-16xH100.log": ("megatron-lm", 3, 5.56577, "tflopsPerGpu", 234.733),
    "03-torchtitan-rank0-steps-200-250-gc-profiler.log": ("torchtitan", 6, 1.41048, "tokensPerSecond", 5818.667),
    "05-nemo1-progressbar-slow-41s-per-it.log": ("nemo1", 1, 41.36, "loss", 3.09),
    "06-nemo2-bionemo-train-step-timing.log": ("nemo2", 6, 0.031663, "globalBatchSize", 1.0),
    "07-nanochat-a100-dt-toksec-mfu.log": ("nanochat", 7, 0.99321, "mfuPercent", 73.847),
    "08-nanogpt-a100-shakespeare-char.log": ("nanogpt", 25, 0.898041, "mfuPercent", 16.62),
    "09-deepspeed-engine-timer-2022.log": ("deepspeed", 2, 1.5145, "stepTimeSeconds", 1.5145),
    "10-maxtext-v5p-deepseek2-16b.log": ("maxtext", 10, 5.633625, "tflopsPerGpu", 135.7655),
    "11-gpt-neox-deepspeed-llemma.log": ("gpt-neox", 1, 4.1031, "tflopsPerGpu", 112.9),
    "13-nanotron-si-suffixes.log": ("nanotron", 4, 11.5, "tokensPerSecond", 11400.0),
}


@pytest.mark.parametrize("name", sorted(TRAINING), ids=lambda n: n[:2])
def test_parse_training_sample_as_json(name: str) -> None:
    profile, steps, step_time, field, mean = TRAINING[name]
    result = CliRunner().invoke(parse, ["training", str(DATA / "training" / name), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["profile"], data["stepCount"]) == (profile, steps)
    assert data["stepTimeSeconds"]["mean"] == pytest.approx(step_time, abs=1e-5)
    assert data[field]["mean"] == pytest.approx(mean, abs=1e-3)


def test_parse_training_with_a_named_profile_and_table_output() -> None:
    path = DATA / "training" / "06-nemo2-bionemo-train-step-timing.log"
    result = CliRunner().invoke(parse, ["training", str(path), "--profile", "nemo2", "--format", "table"])
    assert result.exit_code == 0, result.output
    assert "profile: nemo2 (NeMo 2)" in result.output
    assert "missing: tokensPerSecond, tflopsPerGpu, mfuPercent" in result.output


def test_parse_training_without_steps_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.write_text("loading\n", encoding="utf-8")
    result = CliRunner().invoke(parse, ["training", str(path), "--format", "json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["stepCount"] == 0


def test_parse_nccl_table_output_and_stdin() -> None:
    text = (DATA / "nccl" / "07-allgather-v100-outofbounds-FAILED.log").read_text(encoding="utf-8")
    result = CliRunner().invoke(parse, ["nccl", "-", "--format", "table"], input=text)
    assert result.exit_code == 1
    assert "status: failed" in result.output
    assert "[out_of_bounds] Out of bounds values : 2 FAILED" in result.output


def run_dsx(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Through the real entry point, so DsxErrors become exit codes as they do for users."""
    monkeypatch.setitem(cli_main.COMMANDS, "certify-parse", ("dsx.cli.certify_parse_cmd:parse", "test"))
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["certify-parse", *args])
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


@pytest.mark.parametrize("kind", ["nccl", "training"])
def test_missing_file_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    code, err = run_dsx(monkeypatch, capsys, kind, "/nonexistent/run.log")
    assert code == 3
    assert err.strip() == "dsx: error: /nonexistent/run.log: file not found"


@pytest.mark.parametrize("kind", ["nccl", "training"])
def test_unreadable_file_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    binary = tmp_path / "run.log"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, err = run_dsx(monkeypatch, capsys, kind, str(binary))
    assert code == 2 and "not UTF-8 text" in err
    code, err = run_dsx(monkeypatch, capsys, kind, str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_unknown_profile_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "training" / "07-nanochat-a100-dt-toksec-mfu.log"
    code, err = run_dsx(monkeypatch, capsys, "training", str(path), "--profile", "nano")
    assert code == 3 and "log profile: name: 'nano' is not allowed" in err


def test_passed_run_exits_0_through_the_entry_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run_dsx(monkeypatch, capsys, "nccl", str(DATA / "nccl" / "06-allreduce-h200-1node-16G-azure-nhc.log"))
    assert code == 0


@pytest.mark.parametrize(
    ("kind", "name"),
    [("nccl", name) for name in sorted(NCCL)] + [("training", name) for name in sorted(TRAINING)],
    ids=lambda v: v[:2],
)
def test_through_dsx_certify_parse(kind: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The user's path: `dsx certify parse KIND FILE --format json` on the raw sample file."""
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["certify", "parse", kind, str(DATA / kind / name), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    if kind == "nccl":
        code, collective, rows, max_busbw, avg = NCCL[name]
        (table,) = data["tables"]
        assert (table["collective"], table["rowCount"], table["maxBusbwGbps"], table["avgBusbwGbps"]) == (
            collective,
            rows,
            max_busbw,
            avg,
        )
        assert exit_info.value.code == code
    else:
        profile, steps, step_time, _, _ = TRAINING[name]
        assert (data["profile"], data["stepCount"]) == (profile, steps)
        assert data["stepTimeSeconds"]["mean"] == pytest.approx(step_time, abs=1e-5)
        assert exit_info.value.code == 0
