"""Application factory: wires security, the error table and the route modules.

Every error leaves as `{"error": {"code", "message"}}` with the HTTP status from
`dsx.errors`; no stack trace ever reaches a response body.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from dsx import __version__
from dsx.api import security
from dsx.errors import DsxError

log = logging.getLogger("dsx.api")


@dataclass
class ApiSettings:
    """What `dsx serve` configures; each default is named in `dsx.api.security`."""

    token_digests: frozenset[str] = frozenset()
    max_body_bytes: int = security.DEFAULT_MAX_BODY_BYTES
    rate_per_second: float = security.DEFAULT_RATE_PER_SECOND
    burst: int = security.DEFAULT_BURST
    store_url: str | None = None
    """Sentinel event store (sqlite:///… or postgresql://…); None disables /v1/sentinel."""
    extra: dict[str, Any] = field(default_factory=dict)


def _error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def create_app(settings: ApiSettings) -> Any:
    """The ASGI application: FastAPI wrapped in the guard middleware."""
    from dsx.api import metrics, routes

    api = FastAPI(
        title="dsx",
        version=__version__,
        description="Configure, certify and operate GPU Kubernetes clusters.",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    api.state.settings = settings

    @api.exception_handler(DsxError)
    async def _dsx_error(request: Request, exc: DsxError) -> JSONResponse:
        return JSONResponse(_error_body(exc.code, exc.message), status_code=exc.http_status)

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()))
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return JSONResponse(_error_body("INVALID_REQUEST", "; ".join(problems) or "invalid request"), 400)

    @api.exception_handler(security.BodyTooLargeError)
    async def _too_large(request: Request, exc: security.BodyTooLargeError) -> JSONResponse:
        return JSONResponse(_error_body("PAYLOAD_TOO_LARGE", str(exc)), 413)

    @api.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(_error_body("INTERNAL", "internal error; see the server log"), 500)

    @api.get("/healthz", response_class=PlainTextResponse, tags=["health"])
    def healthz() -> str:
        """Liveness: the process serves requests."""
        return "ok"

    @api.get("/readyz", response_class=PlainTextResponse, tags=["health"])
    def readyz() -> str:
        """Readiness: the catalog loads (and the store answers, when configured)."""
        routes.check_ready(settings)
        return "ok"

    metrics.mount(api)
    routes.register(api, settings)

    guarded = security.GuardMiddleware(
        api,
        authenticator=security.TokenAuthenticator(settings.token_digests),
        limiter=security.TokenBucket(rate_per_second=settings.rate_per_second, burst=settings.burst),
        max_body_bytes=settings.max_body_bytes,
    )
    guarded.openapi = api.openapi  # type: ignore[attr-defined]
    guarded.fastapi = api  # type: ignore[attr-defined]
    return guarded
