"""Response models of the REST API (msgspec Structs, camelCase keys) and the finishing of its
OpenAPI document; `dsx.api.wire` decodes, encodes and gives their component schemas.

Why post-process the document rather than annotate every route: the token rule
(`security.needs_token`), the guard's rejections (401, 413, 429) and the error table
(`dsx.errors`) apply to every operation alike, so one function states them once and no
route can forget them. FastAPI's own `422 HTTPValidationError` is removed: validation
errors leave as `400 INVALID_REQUEST` in the dsx error shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from dsx.api import security, wire
from dsx.model.certification import Result

if TYPE_CHECKING:
    from fastapi import FastAPI


class Model(msgspec.Struct, rename="camel", kw_only=True):
    """An API model: camelCase keys on the wire, as every dsx document."""


class ErrorDetail(Model, kw_only=True):
    code: Annotated[
        str, msgspec.Meta(description="Stable machine-readable code from the dsx error table.", examples=["NOT_FOUND"])
    ]
    message: Annotated[str, msgspec.Meta(description="One line for a person: names the field and the allowed values.")]


class ErrorBody(Model, kw_only=True):
    """Every error the API answers; never a stack trace."""

    error: ErrorDetail


class RecipeDocument(Model, kw_only=True):
    """A resolved recipe, as `dsx recipe` writes it (docs/recipes.md); other fields pass through."""

    api_version: str
    kind: str
    metadata: dict[str, Any]
    constraints: list[Any]
    component_refs: list[dict[str, Any]]
    certification: Any = None
    deployment_order: list[str]


class QueryAnswer(Model, kw_only=True):
    selector: Annotated[str, msgspec.Meta(examples=["components.gpu-operator.values.driver.version"])]
    value: Annotated[Any, msgspec.Meta(description="The value at the selector: a scalar, list or mapping.")]


class ValidationReport(Model, kw_only=True):
    """The validation result as a CTRF report (https://ctrf.io), as `dsx validate --format ctrf` writes it."""

    report_format: Annotated[str, msgspec.Meta(examples=["CTRF"])]
    spec_version: str
    results: dict[str, Any]
    extra: Annotated[dict[str, Any], msgspec.Meta(description="recipe, snapshot, phases and the verdict.")]


class CertificationStatus(Model, kw_only=True):
    id: Annotated[str, msgspec.Meta(examples=["3f9a1c2b7d4e5f60"])]
    status: Result
    error: Annotated[str | None, msgspec.Meta(description="Why the run is INCOMPLETE, when it is.")]
    failed_nodes: list[str]


class CertificationReport(Model, kw_only=True):
    """The certification report document, as `dsx certify run --output` writes it; other fields pass through."""

    api_version: str
    kind: str
    result: Result
    failed_nodes: list[str]


class ValidationRequestView(Model, kw_only=True):
    id: str
    node: str
    reason: str
    status: str
    requested_at: Annotated[str, msgspec.Meta(description="ISO 8601.")]
    detail: Any


class DeadLetterView(Model, kw_only=True):
    stage: str
    sequence: int
    node: str
    attempts: int
    error: str
    traceback: str
    parked_at: Annotated[str, msgspec.Meta(description="ISO 8601.")]


class ConsumerLagView(Model, kw_only=True):
    consumer: str
    cursor: int
    behind_events: Annotated[int, msgspec.Meta(description="Stored events past the cursor.")]
    behind_seconds: Annotated[float, msgspec.Meta(description="How long the oldest of them has waited.")]
    history_lost: Annotated[bool, msgspec.Meta(description="The cursor is past the newest event: history lost.")]


class SentinelStatus(Model, kw_only=True):
    """What `dsx sentinel status` shows: nodes out of service, validation requests, breaker, cursors, lag."""

    nodes: list[dict[str, Any]]
    validation_requests: list[ValidationRequestView]
    breaker: dict[str, Any] | None
    dead_letters: list[DeadLetterView]
    cursors: dict[str, int]
    last_sequence: int
    consumers: list[ConsumerLagView]


class StoredEvent(Model, kw_only=True):
    sequence: int
    stored_at: Annotated[str, msgspec.Meta(description="When the store took the event (ISO 8601).")]
    event: Annotated[dict[str, Any], msgspec.Meta(description="The HealthEvent (docs/sentinel.md).")]


class EventsPage(Model, kw_only=True):
    events: list[StoredEvent]


class EventsAccepted(Model, kw_only=True):
    accepted: int
    created: Annotated[int, msgspec.Meta(description="Events stored now; the rest were re-sent and already stored.")]
    sequences: list[int]


ERROR_DESCRIPTIONS = {
    400: "Bad input (INVALID_REQUEST): the message names the field and the allowed values.",
    401: "Missing or invalid bearer token (UNAUTHORIZED).",
    404: "Not found (NOT_FOUND): the message names what is missing.",
    409: "Conflict (CONFLICT): retry later.",
    413: "Request body over --max-body-bytes (PAYLOAD_TOO_LARGE).",
    415: "Request body is not application/json (UNSUPPORTED_MEDIA_TYPE).",
    422: "A check ran and failed (CHECK_FAILED), e.g. strict criteria that are not validated.",
    429: "Too many requests for this token (RATE_LIMITED); Retry-After says when to retry.",
    500: "Internal error (INTERNAL); the server log has the details.",
    503: "A dependency is unavailable (UNAVAILABLE), e.g. the event store.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: the errors it answers beyond those every operation has."""
    error = {"content": {wire.JSON: {"schema": wire.ref(ErrorBody)}}}
    return {status: {**error, "description": ERROR_DESCRIPTIONS[status]} for status in statuses}


BEARER = "bearerAuth"
_ERROR_REF = {"content": {wire.JSON: {"schema": wire.ref(ErrorBody)}}}
_BODY_METHODS = frozenset({"post", "put", "patch"})


def finish(document: dict[str, Any]) -> dict[str, Any]:
    """Add the bearer scheme and the errors every operation shares; drop FastAPI's 422."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    wire.ref(ErrorBody)
    schemas.update(wire.components())
    components["securitySchemes"] = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "A token from `dsx serve --token-file` or $DSX_API_TOKENS (16 characters or more).",
        }
    }
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if operation.get("description"):  # the docstring's first line, not "Get Recipe"
                operation["summary"] = operation["description"].split("\n", 1)[0].rstrip(".")
            responses = operation.setdefault("responses", {})
            old = responses.get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if old.get("$ref", "").endswith("/HTTPValidationError"):
                del responses["422"]
            shared = [500]
            if operation.get("parameters"):
                shared.append(400)
            if method in _BODY_METHODS and "requestBody" in operation:
                shared += [400, 413, 415]
            if security.needs_token(path):
                operation["security"] = [{BEARER: []}]
                shared += [401, 429]
            for status in sorted(set(shared)):
                responses.setdefault(str(status), {"description": ERROR_DESCRIPTIONS[status]})
            for status, answer in responses.items():
                if status >= "400":  # errors are JSON whatever the success media type (text, zip)
                    answer.update(_ERROR_REF)
            operation["responses"] = dict(sorted(responses.items()))
    return document


def openapi(api: FastAPI) -> dict[str, Any]:
    """The finished OpenAPI document of `api`, built once."""
    from fastapi.openapi.utils import get_openapi

    if api.openapi_schema is None:
        document = get_openapi(
            title=api.title,
            version=api.version,
            description=api.description,
            routes=api.routes,
            tags=api.openapi_tags,
        )
        api.openapi_schema = finish(document)
    return api.openapi_schema
