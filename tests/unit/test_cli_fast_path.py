"""`dsx recipe` and `dsx query` without click (`dsx.cli.entry`) behave exactly as through click.

The fast path parses plain flags itself and hands everything else to click; each case runs both
ways in this process (click forced by making `entry.parse` decline) and compares stdout, stderr
and the exit code, so a flag, message or exit code that drifts between the two fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.cli import entry, recipe_cmd
from dsx.cli import main as cli_main
from dsx.cli import output as cli_output

TRAINING = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]
DYNAMO = [
    "--service",
    "aks",
    "--accelerator",
    "h100",
    "--os",
    "ubuntu",
    "--intent",
    "inference",
    "--platform",
    "dynamo",
]
DRIVER = "components.gpu-operator.values.driver.version"

SAME_BOTH_WAYS = [
    ["recipe", *TRAINING, "--platform", "kubeflow"],
    ["recipe", "--service", "gke", "--accelerator", "h100", "--os", "cos", "--intent", "training"],
    ["recipe", *DYNAMO],
    ["recipe", "--service", "kind", "--accelerator", "h100", "--intent", "inference"],
    ["recipe"],
    ["recipe", "--gpu", "gb200", "--service=oke", "--nodes", "8"],
    ["recipe", "--service", "EKS", "--format", "JSON"],
    ["recipe", "--service", "eks", "--accelerator", "h100", "--intent", "training", "--strict"],
    ["recipe", *TRAINING, "--strict"],
    ["recipe", "--service", "ecs"],
    ["recipe", "--service", "eks", "--accelerator", "h999"],
    ["recipe", "--service", "eks", "--nodes", "0"],
    ["recipe", "--service", ""],
    ["query", *TRAINING, "--selector", DRIVER],
    ["query", "--service", "eks", "--selector", "deploymentOrder"],
    ["query", "--service", "eks", "--selector", "deploymentOrder[0]"],
    ["query", "--service", "eks", "--selector", ".metadata.name"],
    ["query", "--service", "eks", "--selector", "."],
    ["query", "--service", "eks", "--selector", "components.gpu-operator.values", "--format", "json"],
    ["query", "--service", "eks", "--selector", "components.gpu-operator.values.nope"],
    ["query", "--service", "eks", "--selector", "a..b"],
    ["query", "--service", "eks", "--selector", 'components["gpu-operator"].version'],
    ["query", "--service", "bad", "--selector", "metadata"],
]


TO_CLICK = [
    ["recipe", "--help"],
    ["recipe", "-h"],
    ["recipe", "--service", "eks", "--format", "table"],
    ["recipe", "--service", "eks", "--format", "xml"],
    ["recipe", "--service", "eks", "--bogus"],
    ["recipe", "--service"],
    ["recipe", "--service", "eks", "--service", "gke"],
    ["recipe", "--service", "eks", "--gpu", "h100", "--accelerator", "h200"],
    ["recipe", "extra"],
    ["recipe", "--strict=1"],
    ["recipe", "--config", "criteria.yaml"],
    ["recipe", "--snapshot", "snapshot.yaml"],
    ["query", "--service", "eks"],
    ["query", "--recipe", "recipe.yaml", "--selector", "metadata"],
    ["query", "--service", "eks", "--selector", "metadata", "--strict"],
    ["query", "--service", "-x", "--selector", "metadata"],
    ["--debug", "recipe"],
    ["lint"],
]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        cli_main.main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.parametrize("args", SAME_BOTH_WAYS, ids=" ".join)
def test_the_fast_path_writes_what_click_writes(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert entry.parse(args) is not None
    fast = _run(args, capsys)
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    through_click = _run(args, capsys)
    assert fast == through_click
    assert fast[1] or fast[2]  # it wrote something


@pytest.mark.parametrize("args", TO_CLICK, ids=" ".join)
def test_help_errors_and_unusual_flags_go_to_click(args: list[str]) -> None:
    assert entry.parse(args) is None


def test_a_file_output_is_the_same_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = tmp_path / "fast.yaml", tmp_path / "click.yaml"
    assert _run(["recipe", *TRAINING, "-o", str(fast)], capsys) == (0, "", "")
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    assert _run(["recipe", *TRAINING, "--output", str(slow)], capsys) == (0, "", "")
    assert fast.read_bytes() == slow.read_bytes()


def test_an_output_path_click_would_refuse_goes_to_click(tmp_path: Path) -> None:
    assert entry.parse(["recipe", "-o", str(tmp_path)]) is None  # a directory
    assert entry.parse(["recipe", "-o", ""]) is None


def test_shell_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(entry.COMPLETE_VAR, "bash_complete")
    assert entry.parse(["recipe", *TRAINING]) is None


def test_the_fast_path_knows_the_flags_click_declares() -> None:
    """Its criteria flags come from the criteria table; click's from the same table: they must agree."""
    declared = {opt for param in recipe_cmd.recipe.params for opt in param.opts}
    files = ("config_path", "snapshot_path")
    criteria = {flag for name, flag in recipe_cmd.CRITERIA_FLAGS.items() if name not in files}
    fast_criteria = set(entry._criteria_flags())
    assert fast_criteria == criteria | {"--gpu"}
    assert fast_criteria | set(entry._OUTPUT_FLAGS) | {"--strict"} <= declared
    query_declared = {opt for param in recipe_cmd.query.params for opt in param.opts}
    assert fast_criteria | set(entry._OUTPUT_FLAGS) | {"--selector"} <= query_declared
    assert cli_output.FORMATS[0] == "yaml"  # the default both paths write
