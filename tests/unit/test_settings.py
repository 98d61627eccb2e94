"""`dsx.settings` holds the one rule for where dsx keeps its folders, over the mapping it is given;
`dsx.settings.folders` builds `PathSettings` from it, and the CLI's entry point reads `os.environ`
with it once per command. Domain code is handed the folder (`resolve.document(..., cache_dir=)`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from dsx import settings
from dsx.cli import main
from dsx.settings import folders


def test_explicit_folders_win() -> None:
    found = folders.from_env({"DSX_CACHE_DIR": "/c", "DSX_STATE_DIR": "/s", "XDG_CACHE_HOME": "/x"})
    assert (found.cache_dir, found.state_dir) == (Path("/c"), Path("/s"))
    assert settings.service_account_root({"DSX_SERVICE_ACCOUNT_DIR": "/sa"}) == "/sa"
    assert (found.chart_cache, found.sim_dir) == (Path("/c/charts"), Path("/s/sim"))


def test_xdg_then_home_and_empty_means_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "not-read"))  # the mapping's HOME counts, not the process's
    found = folders.from_env(
        {"DSX_CACHE_DIR": "", "XDG_CACHE_HOME": "/xdg", "XDG_STATE_HOME": "", "HOME": str(tmp_path)}
    )
    assert found.cache_dir == Path("/xdg/dsx")
    assert found.state_dir == tmp_path / ".local" / "state" / "dsx"
    assert settings.service_account_root({"DSX_SERVICE_ACCOUNT_DIR": ""}) == settings.SERVICE_ACCOUNT_DIR


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"DSX_CACHE_DIR": "/x/cache", "DSX_STATE_DIR": "/x/state", "DSX_SERVICE_ACCOUNT_DIR": "/sa"},
        {"XDG_CACHE_HOME": "/xdg", "XDG_STATE_HOME": "/xdg-state"},
        {"DSX_CACHE_DIR": "", "XDG_CACHE_HOME": "/xdg", "DSX_SERVICE_ACCOUNT_DIR": ""},
    ],
)
def test_the_text_rule_and_path_settings_agree(environ: dict[str, str]) -> None:
    """The fast path uses the rule as text (`settings.cache_root`); `folders.from_env` is the same rule."""
    found = folders.from_env(environ)
    assert Path(settings.cache_root(environ)) == found.cache_dir
    assert Path(settings.state_root(environ)) == found.state_dir


def test_importing_settings_costs_no_dataclasses_or_pathlib() -> None:
    """`dsx recipe`'s fast path imports `dsx.settings` for the rule: it must stay as light as `os`."""
    import subprocess
    import sys

    code = "import sys, dsx.settings; print(sorted({'dataclasses', 'pathlib', 'typing'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_without_an_entry_point_paths_reads_the_process_environment_when_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSX_STATE_DIR", "/first")
    assert folders.paths().state_dir == Path("/first")
    monkeypatch.setenv("DSX_STATE_DIR", "/second")
    assert folders.paths().sim_dir == Path("/second/sim")


def test_inside_an_entry_point_paths_is_what_the_entry_point_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSX_CACHE_DIR", "/read-at-start")
    with folders.entry_point(os.environ) as found:
        monkeypatch.setenv("DSX_CACHE_DIR", "/changed-later")
        assert folders.paths() is found and found.cache_dir == Path("/read-at-start")
        with folders.entry_point({"DSX_CACHE_DIR": "/inner"}):
            assert folders.paths().cache_dir == Path("/inner")
        assert folders.paths().cache_dir == Path("/read-at-start")
    assert folders.paths().cache_dir == Path("/changed-later")  # after the entry point: the library default


RECIPE = ["recipe", "--service", "eks", "--accelerator", "h100", "--intent", "training"]


def test_the_cli_reads_the_environment_once_and_recipe_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry point reads `DSX_CACHE_DIR` once; `dsx recipe` writes nothing there, as the shipped
    catalog comes compiled inside the package (`dsx.recipes.compiled`)."""
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[Path] = []
    real = folders.from_env

    def spy(environ: Mapping[str, str]) -> folders.PathSettings:
        found = real(environ)
        seen.append(found.cache_dir)
        return found

    monkeypatch.setattr(folders, "from_env", spy)
    with pytest.raises(SystemExit) as exit_info:
        main.main([*RECIPE, "-o", str(tmp_path / "r.yaml")])
    assert exit_info.value.code == 0
    assert seen == [tmp_path / "cache"]  # read once, at the entry point
    assert (tmp_path / "r.yaml").read_text(encoding="utf-8").startswith("apiVersion: ")
    assert not (tmp_path / "cache").exists()
