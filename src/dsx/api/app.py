"""Application factory: wires security, the error table, the route modules and the /docs page.

Every error leaves as `{"error": {"code", "message"}}` with the HTTP status from
`dsx.errors` (unknown routes and methods too); no stack trace ever reaches a response body.
/docs is Swagger UI from the `fastapi-offline` package's files: no CDN, so it works offline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException

from dsx import __version__
from dsx.api import schemas, security
from dsx.errors import DsxError, UnsupportedMediaTypeError
from dsx.ratelimit import TokenBucket

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


JSON = "application/json"


def _json_bodies_only(request: Request) -> None:
    """A body must be JSON; say so (415) instead of failing validation on form-encoded bytes."""
    if request.method not in ("POST", "PUT", "PATCH") or request.headers.get("content-length", "0") == "0":
        return
    given = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if given != JSON and not given.endswith("+json"):
        raise UnsupportedMediaTypeError(
            f"{request.method} {request.url.path}: the body must be {JSON}, got {given or 'no Content-Type'}; "
            f"send the header Content-Type: {JSON} (curl: -H 'Content-Type: {JSON}')"
        )


_DOCS_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}


def _mount_docs(api: FastAPI) -> None:
    """/docs: Swagger UI, its script and style served from the installed package."""
    from importlib import resources

    import fastapi_offline
    from fastapi.openapi.docs import get_swagger_ui_html

    assets = resources.files(fastapi_offline) / "static"

    @api.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"dsx {__version__} API",
            swagger_js_url="/docs/swagger-ui-bundle.js",
            swagger_css_url="/docs/swagger-ui.css",
            swagger_favicon_url="/docs/favicon.png",
            swagger_ui_parameters={"displayRequestDuration": True, "defaultModelsExpandDepth": 0},
        )

    def serve(body: bytes, media_type: str) -> Callable[[], Response]:
        """A handler without parameters: nothing in the request chooses what is read."""
        return lambda: Response(body, media_type=media_type, headers={"cache-control": "max-age=3600"})

    for name, media_type in _DOCS_ASSETS.items():
        body = (assets / name).read_bytes()
        api.add_api_route(f"/docs/{name}", serve(body, media_type), methods=["GET"], include_in_schema=False)


def _methods(api: FastAPI, path: str) -> list[str]:
    """Every method some route serves at `path` (Starlette's 405 names only the first route's)."""
    found: set[str] = set()
    for route in api.routes:
        regex, methods = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and methods and regex.match(path):
            found |= set(methods)
    return sorted(found - {"HEAD"})


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
        dependencies=[Depends(_json_bodies_only)],
    )
    api.state.settings = settings
    api.openapi = lambda: schemas.openapi(api)  # type: ignore[method-assign]

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

    @api.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        """Starlette's own answers (unknown route 404, wrong method 405) in the dsx shape."""
        if exc.status_code == 404:
            body = _error_body("NOT_FOUND", f"no route {request.url.path}; the routes are listed at /docs")
        elif exc.status_code == 405:
            allowed = ", ".join(_methods(api, request.url.path))
            message = f"{request.method} is not allowed on {request.url.path}; allowed: {allowed}"
            body = _error_body("METHOD_NOT_ALLOWED", message)
            return JSONResponse(body, status_code=405, headers={"allow": allowed})
        else:
            body = _error_body(HTTPStatus(exc.status_code).name, str(exc.detail))
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

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

    @api.get("/readyz", response_class=PlainTextResponse, tags=["health"], responses=schemas.errors(503))
    def readyz() -> str:
        """Readiness: the catalog loads (and the store answers, when configured)."""
        routes.check_ready(settings)
        return "ok"

    metrics.mount(api)
    routes.register(api, settings)
    _mount_docs(api)

    guarded = security.GuardMiddleware(
        api,
        authenticator=security.TokenAuthenticator(settings.token_digests),
        limiter=TokenBucket(rate_per_second=settings.rate_per_second, burst=settings.burst),
        max_body_bytes=settings.max_body_bytes,
    )
    guarded.openapi = api.openapi  # type: ignore[attr-defined]
    guarded.fastapi = api  # type: ignore[attr-defined]
    return guarded
