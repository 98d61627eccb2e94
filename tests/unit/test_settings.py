"""`dsx.settings.from_env` is the one reader of the environment: it reads the mapping it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx import settings


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


def test_paths_reads_the_process_environment_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSX_STATE_DIR", "/first")
    assert settings.paths().state_dir == Path("/first")
    monkeypatch.setenv("DSX_STATE_DIR", "/second")
    assert settings.paths().sim_dir == Path("/second/sim")
