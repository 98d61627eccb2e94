"""Area of concern: `dsx lint` — verdict exit codes, output formats, not-linted reporting, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsx.cli import main as cli_main

LINT_DATA = Path(__file__).resolve().parents[2] / "data" / "lint"
CHARTS = str(LINT_DATA / "charts")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["lint", *args])
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


def test_findings_exit_1_and_name_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = str(LINT_DATA / "recipes" / "stale-keys.yaml")

    code, out, err = run(capsys, "--recipe", recipe, "--charts", CHARTS, "--offline", "--format", "json")

    assert code == 1
    report = json.loads(out)
    assert [f["path"] for f in report["findings"]] == [
        "driver.maxParallelUpgrades",
        "driver.useOpenKernelModules",
        "deployCR",
        "nicClusterPolicy",
        "nvIpam",
        "secondaryNetwork",
    ]
    assert report["findings"][0]["suggestion"] == "driver.upgradePolicy.maxParallelUpgrades"
    assert err.startswith("lint FAILED: 6 finding(s) in 2 linted component(s)")


def test_a_clean_recipe_exits_0_with_a_table_summary(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = str(LINT_DATA / "recipes" / "clean.yaml")

    code, out, err = run(capsys, "--recipe", recipe, "--charts", CHARTS, "--offline", "--format", "table")

    assert code == 0
    assert out == "lint clean: 0 finding(s) in 3 linted component(s); 0 not linted\n"
    assert err == ""


def test_components_without_chart_data_are_listed_and_do_not_fail(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        (LINT_DATA / "recipes" / "clean.yaml")
        .read_text()
        .replace("chart: kai-scheduler", "chart: kai-scheduler-next")
        .replace("version: v0.13.0", "version: v9.9.9")
    )

    code, out, _ = run(capsys, "--recipe", str(recipe), "--charts", CHARTS, "--offline", "--format", "table")

    assert code == 0
    assert "not linted: kai-scheduler v9.9.9: no chart data for kai-scheduler-next v9.9.9: not in --charts" in out
    assert out.endswith("lint clean: 0 finding(s) in 2 linted component(s); 1 not linted (not checked, not failures)\n")


def test_the_yaml_report_is_byte_identical_across_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recipe = str(LINT_DATA / "recipes" / "stale-keys.yaml")
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"

    run(capsys, "--recipe", recipe, "--charts", CHARTS, "--offline", "-o", str(first))
    run(capsys, "--recipe", recipe, "--charts", CHARTS, "--offline", "-o", str(second))

    assert first.read_bytes() == second.read_bytes()
    assert b"did you mean driver.kernelModuleType?" in first.read_bytes()


def test_recipe_and_criteria_together_are_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--recipe", "r.yaml", "--service", "eks")

    assert code == 2
    assert err == "dsx: error: --recipe and criteria flags (--service) are exclusive\n"


def test_a_missing_recipe_file_is_one_line_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "--recipe", str(tmp_path / "nope.yaml"), "--offline")

    assert code == 3
    assert err == f"dsx: error: {tmp_path / 'nope.yaml'}: file not found\n"


def test_a_missing_charts_directory_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "--recipe", "r.yaml", "--charts", str(tmp_path / "absent"))

    assert code == 2
    assert "--charts" in err and "does not exist" in err
