"""The allowed-values table is the one place a criteria value is named: a value added to it shows
in the engine's checks, the CLI flags' help and the API's OpenAPI document alike."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import click
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from dsx.api import app as api_app
from dsx.api import routes_configure
from dsx.cli import recipe_cmd
from dsx.model import criteria

NEW = "newcloud-9"


@pytest.fixture
def extended(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The table with one more service; the API models are rebuilt from it, and again after."""
    monkeypatch.setitem(criteria.DIMENSIONS, "service", (NEW, *criteria.DIMENSIONS["service"]))
    importlib.reload(routes_configure)
    yield
    monkeypatch.undo()
    importlib.reload(routes_configure)


def _cli_help() -> str:
    @click.command()
    @recipe_cmd.criteria_options
    def probe(**_: Any) -> None:
        """A command with the criteria flags."""

    result = CliRunner().invoke(probe, ["--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    return result.output


def _openapi_text() -> str:
    settings = api_app.ApiSettings(token_digests=frozenset(), max_body_bytes=1024, rate_per_second=1, burst=1)
    with TestClient(api_app.create_app(settings)) as client:
        answer = client.get("/openapi.json")
    assert answer.status_code == 200
    return json.dumps(answer.json())


def test_a_new_value_reaches_the_engine_the_cli_and_the_api(extended: None) -> None:
    assert criteria.parse_criteria({"service": NEW.upper()}, source="test").service == NEW
    assert NEW in _cli_help()
    assert NEW in _openapi_text()


def test_without_it_none_of_them_know_the_value() -> None:
    assert NEW not in criteria.DIMENSIONS["service"]
    assert NEW not in _cli_help()
    assert NEW not in _openapi_text()
    for dimension, allowed in criteria.DIMENSIONS.items():
        assert criteria.describe(dimension) in _cli_help()
        assert allowed[-1] == criteria.ANY
