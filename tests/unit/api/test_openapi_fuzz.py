"""Schemathesis drives every operation of the OpenAPI document; no input may cause a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from dsx.api import app as api_app
from dsx.api import routes_certify, security

TOKEN = "fuzz-token-0123456789abcdef"
APP = api_app.create_app(
    api_app.ApiSettings(token_digests=frozenset({security._digest(TOKEN)}), rate_per_second=1e6, burst=10**6)
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, headers={"Authorization": f"Bearer {TOKEN}"})


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case) -> None:
    response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
    case.validate_response(response, checks=(not_a_server_error,))


@pytest.fixture(autouse=True, scope="module")
def _no_run_left_behind() -> Iterator[None]:
    """A fuzzed POST /v1/certifications starts a real local run; let it finish before the session ends."""
    yield
    assert routes_certify.wait_idle(APP.fastapi, timeout_seconds=600)
