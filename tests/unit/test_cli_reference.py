"""Area of concern: docs/cli-reference.md is the CLI's own help, current — regenerated from the
click command tree here and compared with the committed file, so a changed option without a
regenerated reference fails the build."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import click
import pytest

from dsx.cli.main import COMMANDS, cli

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "hack" / "gen-cli-reference.py"
REFERENCE = REPO / "docs" / "cli-reference.md"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_reference", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(generator: ModuleType) -> str:
    text: str = generator.render()
    return text


def test_the_committed_reference_is_current() -> None:
    # a fresh interpreter: click caches each command's help option on first use, so commands
    # already invoked by other tests in this process would render a different help text
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, (
        "docs/cli-reference.md is stale: run `.venv/bin/python hack/gen-cli-reference.py` and commit the result\n"
        + result.stdout
        + result.stderr
    )


def test_every_command_and_subcommand_has_a_section_with_its_help(generated: str) -> None:
    headings = re.findall(r"^#{2,3} (dsx(?: [a-z-]+)*)$", generated, flags=re.MULTILINE)
    for name in COMMANDS:
        assert f"dsx {name}" in headings, name
    ctx = click.Context(cli, info_name="dsx")
    sim = cli.get_command(ctx, "sim")
    assert isinstance(sim, click.Group)
    for sub in sim.list_commands(ctx):
        assert f"dsx sim {sub}" in headings
    assert len(headings) == len(set(headings))


def test_options_choices_and_defaults_are_in_the_reference(generated: str) -> None:
    demo = generated.split("## dsx demo\n", 1)[1].split("\n## ", 1)[0]
    for text in ("Usage: dsx demo [OPTIONS]", "--summary-json", "--keep", "[default: demo-out]"):
        assert text in demo, text
    up = generated.split("### dsx sim up\n", 1)[1].split("\n### ", 1)[0]
    assert "[h100|h200|b200|gb200|a100|l40s]" in up


def test_the_reference_does_not_depend_on_the_terminal(generator: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    assert generator.render() == REFERENCE.read_text(encoding="utf-8")


def test_check_mode_reports_a_stale_file(
    generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "docs" / "cli-reference.md"
    stale.parent.mkdir()
    stale.write_text("# old\n", encoding="utf-8")
    monkeypatch.setattr(generator, "TARGET", stale)
    monkeypatch.setattr(generator, "REPO", tmp_path)
    assert generator.main(["--check"]) == 1
    assert "is stale" in capsys.readouterr().out
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


def test_the_reference_does_not_depend_on_what_ran_before(
    generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """click caches each command's help option; the reference must match real `dsx … --help` either way."""
    from dsx.cli.main import main

    for argv in (["--help"], ["sim", "up", "-h"]):
        with pytest.raises(SystemExit):
            main(argv)
    shown = capsys.readouterr().out
    assert "-h, --help" in shown
    assert generator.render() == REFERENCE.read_text(encoding="utf-8")
