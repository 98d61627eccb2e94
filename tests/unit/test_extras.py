"""Area of concern: the table of optional extras agrees with pyproject.toml, and a missing extra
becomes a clear error with its install command (exit 3), never an internal error."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from dsx import errors, extras
from dsx.cli import main as cli_main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras() -> dict[str, set[str]]:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return {
        extra: {_normal(Requirement(r).name) for r in requirements}
        for extra, requirements in declared.items()
        if extra not in ("all", "dev")
    }


def test_every_module_in_the_table_comes_from_a_distribution_of_its_extra() -> None:
    providers = metadata.packages_distributions()
    declared = _extras()
    for module, extra in extras.EXTRA_OF_MODULE.items():
        assert extra in declared, f"{module}: extra {extra!r} is not declared in pyproject.toml"
        distributions = {_normal(d) for d in providers.get(module, [])}
        assert distributions & declared[extra], f"{module} comes from {distributions}, not from dsx[{extra}]"


def test_every_extra_that_dsx_imports_from_is_in_the_table() -> None:
    assert set(extras.EXTRA_OF_MODULE.values()) == set(_extras())


def test_a_missing_extra_becomes_exit_3_with_the_install_command() -> None:
    error = extras.missing(ModuleNotFoundError("No module named 'fastapi'", name="fastapi"), needed_by="dsx serve")
    assert isinstance(error, errors.MissingExtraError)
    assert error.exit_code == 3 and error.http_status == 501
    assert str(error).startswith("dsx serve needs the optional extra 'api' (module 'fastapi' is not installed)")
    assert "pip install 'dsx[api]'" in str(error)
    assert extras.missing(ModuleNotFoundError("No module named 'dsx.nothing'", name="dsx.nothing")) is None


def test_the_cli_reports_a_missing_extra_imported_while_a_command_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def needs_torch(*_: object, **__: object) -> None:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(cli_main.cli, "main", needs_torch)
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["certify", "run"])
    assert exited.value.code == 3
    assert "pip install 'dsx[collectives]'" in capsys.readouterr().err


def test_an_import_error_of_dsx_itself_stays_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise ModuleNotFoundError("No module named 'dsx.gone'", name="dsx.gone")

    monkeypatch.setattr(cli_main.cli, "main", broken)
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["recipe", "--help"])  # through click (plain `dsx recipe` takes the fast path)
    assert exited.value.code == 8
    assert "internal error" in capsys.readouterr().err
