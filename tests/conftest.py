"""Shared fixtures. Integration fixtures (sim cluster, PostgreSQL) live in tests/integration/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["fixtures.sim_cluster", "fixtures.postgres_server"]

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
TESTDATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _isolated_dsx_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep state out of the user's home; the control-plane cache stays shared (it is expensive)."""
    if "DSX_STATE_DIR" not in os.environ:
        monkeypatch.setenv("DSX_STATE_DIR", str(tmp_path_factory.getbasetemp() / "dsx-state"))


@pytest.fixture
def testdata() -> Path:
    return TESTDATA
