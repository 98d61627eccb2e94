"""Area of concern: the ASGI lifespan protocol on dsx's server, as uvicorn's `lifespan="auto"`
runs it: startup completes before the first request is served and shutdown runs after the
server drained; a failed startup stops the server from binding with the application's message;
an application that does not speak lifespan is served without it."""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI

from dsx.api import security, server
from dsx.errors import UnavailableError

AUTHENTICATOR = security.TokenAuthenticator(frozenset())


def recording_app(events: list[str]) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("startup")
        yield
        events.append("shutdown")

    app = FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, list[str]]:
        return {"seen": list(events)}

    return app


def test_startup_runs_before_the_first_request_and_shutdown_after_the_drain() -> None:
    events: list[str] = []
    bound, loop = server.asgi_server(recording_app(events), AUTHENTICATOR, port=0)
    assert events == ["startup"] and loop.lifespan_supported
    bound.start("test-lifespan")
    connection = http.client.HTTPConnection("127.0.0.1", bound.port, timeout=5)
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b'{"seen":["startup"]}')
    connection.close()
    bound.stop()
    assert events == ["startup"]
    loop.close()
    assert events == ["startup", "shutdown"]


def test_a_failed_startup_is_an_error_with_the_applications_reason() -> None:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        raise RuntimeError("the event store is unreachable")
        yield

    with pytest.raises(UnavailableError, match=r"failed to start: RuntimeError: the event store is unreachable$"):
        server.asgi_server(FastAPI(lifespan=lifespan), AUTHENTICATOR, port=0)


async def plain_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Speaks HTTP only, as many small ASGI apps do: any other scope raises."""
    assert scope["type"] == "http", scope["type"]
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_an_application_without_lifespan_is_served_without_it() -> None:
    bound, loop = server.asgi_server(plain_app, AUTHENTICATOR, port=0)
    assert not loop.lifespan_supported
    bound.start("test-no-lifespan")
    try:
        connection = http.client.HTTPConnection("127.0.0.1", bound.port, timeout=5)
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"ok")
        connection.close()
    finally:
        bound.stop()
        loop.close()
