"""`dsx.settings.from_env` is the one reader of the environment: it reads the mapping it is given,
and the CLI's entry point reads `os.environ` with it once per command."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from dsx import settings
from dsx.cli import main
from dsx.recipes import catalog, compiled


def test_explicit_folders_win() -> None:
    found = settings.from_env(
        {"DSX_CACHE_DIR": "/c", "DSX_STATE_DIR": "/s", "XDG_CACHE_HOME": "/x", "DSX_SERVICE_ACCOUNT_DIR": "/sa"}
    )
    assert (found.cache_dir, found.state_dir, found.service_account_dir) == (Path("/c"), Path("/s"), Path("/sa"))
    assert (found.chart_cache, found.sim_dir) == (Path("/c/charts"), Path("/s/sim"))


def test_xdg_then_home_and_empty_means_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    found = settings.from_env({"DSX_CACHE_DIR": "", "XDG_CACHE_HOME": "/xdg", "XDG_STATE_HOME": ""})
    assert found.cache_dir == Path("/xdg/dsx")
    assert found.state_dir == tmp_path / ".local" / "state" / "dsx"
    assert found.service_account_dir == settings.SERVICE_ACCOUNT_DIR


def test_without_an_entry_point_paths_reads_the_process_environment_when_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSX_STATE_DIR", "/first")
    assert settings.paths().state_dir == Path("/first")
    monkeypatch.setenv("DSX_STATE_DIR", "/second")
    assert settings.paths().sim_dir == Path("/second/sim")


def test_inside_an_entry_point_paths_is_what_the_entry_point_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSX_CACHE_DIR", "/read-at-start")
    with settings.entry_point(os.environ) as found:
        monkeypatch.setenv("DSX_CACHE_DIR", "/changed-later")
        assert settings.paths() is found and found.cache_dir == Path("/read-at-start")
        with settings.entry_point({"DSX_CACHE_DIR": "/inner"}):
            assert settings.paths().cache_dir == Path("/inner")
        assert settings.paths().cache_dir == Path("/read-at-start")
    assert settings.paths().cache_dir == Path("/changed-later")  # after the entry point: the library default


RECIPE = ["recipe", "--service", "eks", "--accelerator", "h100", "--intent", "training"]


def test_dsx_cache_dir_places_the_cli_cache_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`DSX_CACHE_DIR` read by the CLI's entry point decides where a command caches, as it always did
    (click's path: `--debug` sends even `dsx recipe` there)."""
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[Path] = []
    real = settings.from_env

    def spy(environ: Mapping[str, str]) -> settings.PathSettings:
        found = real(environ)
        seen.append(found.cache_dir)
        return found

    monkeypatch.setattr(settings, "from_env", spy)
    catalog.load.cache_clear()  # an earlier test in this process may have loaded the catalog already
    monkeypatch.setattr(compiled, "_loaded", {})  # and its compiled form
    with pytest.raises(SystemExit) as exit_info:
        main.main(["--debug", *RECIPE, "-o", str(tmp_path / "r.yaml")])
    assert exit_info.value.code == 0
    assert seen == [tmp_path / "cache"]  # read once, at the entry point
    assert list((tmp_path / "cache" / "recipes").glob("catalog-*.json"))


def test_the_fast_path_caches_under_dsx_cache_dir_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain `dsx recipe` runs without click or `dsx.settings` (dsx.cli.entry); its compiled catalog
    goes to the same folder (`compiled.cache_dir` answers as `settings.from_env` does)."""
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "_loaded", {})  # an earlier test may have loaded it in this process
    with pytest.raises(SystemExit) as exit_info:
        main.main([*RECIPE, "-o", str(tmp_path / "r.yaml")])
    assert exit_info.value.code == 0
    assert list((tmp_path / "cache" / "recipes").glob("compiled-*.marshal"))
