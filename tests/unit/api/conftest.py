from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from dsx.api import app as api_app
from dsx.api import security

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def settings() -> api_app.ApiSettings:
    return api_app.ApiSettings(
        token_digests=frozenset({security._digest(TOKEN)}), max_body_bytes=64 * 1024, rate_per_second=1000, burst=1000
    )


@pytest.fixture
def client(settings: api_app.ApiSettings) -> Iterator[TestClient]:
    with TestClient(api_app.create_app(settings), raise_server_exceptions=False) as c:
        yield c
