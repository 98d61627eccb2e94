"""Shared fixtures. The real-dependency fixtures (sim cluster, PostgreSQL) are plugins in tests/fixtures/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests judge results, not speed: on a loaded 2-core CI machine Hypothesis' default
# 200 ms deadline turns a slow example into a spurious failure.
settings.register_profile("dsx", deadline=None)
settings.load_profile("dsx")

pytest_plugins = ["fixtures.sim_cluster", "fixtures.postgres_server", "fixtures.helm", "fixtures.promtool"]

REPO = Path(__file__).resolve().parent.parent
TESTDATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _isolated_dsx_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep state out of the user's home; the control-plane cache stays shared (it is expensive)."""
    if "DSX_STATE_DIR" not in os.environ:
        monkeypatch.setenv("DSX_STATE_DIR", str(tmp_path_factory.getbasetemp() / "dsx-state"))


@pytest.fixture
def testdata() -> Path:
    return TESTDATA
