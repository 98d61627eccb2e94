"""The bridge between FastAPI and msgspec: the API's models are msgspec Structs.

FastAPI stays the router and the OpenAPI builder; it never sees a model. A route reads its JSON
body with `Depends(wire.body(Kind))` (or its query parameters with `wire.query(Kind)`), declares
them with `openapi_extra=wire.request(Kind)` / `wire.parameters(Kind)`, declares its answer with
`wire.answers(Kind)` and returns `wire.respond(value)`. `components()` gives the OpenAPI
component schemas of every Struct so named (msgspec.json.schema_components), which
`schemas.finish` puts into the document. A body or query that does not fit its Struct is 400
`INVALID_REQUEST` naming the field path (`body.nodes: …`, `query.nodes: …`) and the allowed values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from fastapi import Request
from fastapi.responses import Response

from dsx import serialization
from dsx.errors import BadInputError
from dsx.model import schema

T = TypeVar("T")
JSON = "application/json"
REF = "#/components/schemas/{name}"
_named: dict[str, Any] = {}


def ref(kind: Any) -> dict[str, Any]:
    """`{"$ref": …}` to `kind`'s component schema; `kind` is added to the components."""
    name = getattr(kind, "__name__", str(kind))
    _named[name] = kind
    return {"$ref": REF.format(name=name)}


def components() -> dict[str, Any]:
    """The component schemas of every Struct named so far (and the types they use)."""
    kinds = [_named[name] for name in sorted(_named)]
    _, found = msgspec.json.schema_components(kinds, ref_template=REF)
    return dict(sorted(found.items()))


def request(kind: type[Any]) -> dict[str, Any]:
    """`openapi_extra` of a route whose JSON body is a `kind`."""
    content = {JSON: {"schema": ref(kind)}}
    return {"requestBody": {"required": True, "content": content}}


def body(kind: type[T]) -> Callable[[Request], Awaitable[T]]:
    """A dependency: the JSON body decoded as `kind` (400 naming the field when it does not fit)."""

    async def read(request: Request) -> T:
        raw = await request.body()
        if not raw.strip():
            raise BadInputError(f"body: required: a JSON object ({kind.__name__})")
        data = serialization.parse_json(raw, source="request body")
        return schema.decode(data, kind, source="body")

    return read


def parameters(kind: type[Any]) -> dict[str, Any]:
    """`openapi_extra` of a route whose query parameters are the fields of `kind`."""
    document = msgspec.json.schema(kind, ref_template=REF)
    own = document.get("$defs", {}).get(kind.__name__, document)
    required = set(own.get("required", ()))
    listed = [
        {"name": name, "in": "query", "required": name in required, "schema": _not_null(spec)}
        for name, spec in own.get("properties", {}).items()
    ]
    return {"parameters": listed}


def _not_null(spec: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent rather than null: drop the null branch of an optional field."""
    kept = [branch for branch in spec.get("anyOf", ()) if branch != {"type": "null"}]
    if len(kept) == 1 and len(spec.get("anyOf", ())) == 2:
        return {**{k: v for k, v in spec.items() if k != "anyOf"}, **kept[0]}
    return spec


def query(kind: type[T]) -> Callable[[Request], T]:
    """A dependency: the query parameters decoded as `kind` (strings read as numbers and booleans)."""

    def read(request: Request) -> T:
        return schema.decode(dict(request.query_params), kind, source="query", strict=False)

    return read


def answers(kind: type[Any], status: int = 200, description: str = "Successful Response") -> dict[int | str, Any]:
    """`responses=` entry of a JSON answer typed by `kind`."""
    return {status: {"description": description, "content": {JSON: {"schema": ref(kind)}}}}


def respond(value: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response encoded by msgspec (Structs with their camelCase keys, or plain data)."""
    return Response(msgspec.json.encode(value), status_code=status, media_type=JSON, headers=headers)
