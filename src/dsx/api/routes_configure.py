"""/v1/recipe, /v1/query and /v1/bundle: the configure half of dsx over HTTP."""

from __future__ import annotations

import io
import zipfile
from typing import Annotated, Any

import msgspec
from fastapi import Depends, FastAPI
from fastapi.responses import Response

from dsx.api import schemas, wire
from dsx.bundles import options as bundle_options
from dsx.bundles import render as bundle_render
from dsx.model import criteria
from dsx.model import recipe as recipe_model
from dsx.recipes import inputs, resolve, selector

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
"""Fixed zip entry time so the same recipe gives the same archive bytes."""


def _about(name: str) -> str:
    """A criterion's documented values, from the one table (`criteria.DIMENSIONS`); dsx.recipes.inputs checks them."""
    return f"One of {criteria.describe(name)}."


def _example(name: str) -> list[str]:
    return [criteria.DIMENSIONS[name][0]]


class CriteriaBody(schemas.Model, forbid_unknown_fields=True, kw_only=True):
    """Criteria as JSON; the same keys and allowed values as the CLI flags."""

    service: (
        Annotated[str, msgspec.Meta(max_length=32, description=_about("service"), examples=_example("service"))] | None
    ) = None
    accelerator: (
        Annotated[str, msgspec.Meta(max_length=32, description=_about("accelerator"), examples=_example("accelerator"))]
        | None
    ) = None
    os: Annotated[str, msgspec.Meta(max_length=32, description=_about("os"), examples=_example("os"))] | None = None
    intent: (
        Annotated[str, msgspec.Meta(max_length=32, description=_about("intent"), examples=_example("intent"))] | None
    ) = None
    platform: (
        Annotated[str, msgspec.Meta(max_length=32, description=_about("platform"), examples=_example("platform"))]
        | None
    ) = None
    nodes: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None
    strict: bool = False


_Selector = Annotated[
    str, msgspec.Meta(min_length=1, max_length=512, examples=["components.gpu-operator.values.driver.version"])
]


class QueryBody(CriteriaBody, forbid_unknown_fields=True, kw_only=True):
    selector: _Selector


class CriteriaQuery(CriteriaBody, forbid_unknown_fields=False, kw_only=True):
    """The same criteria as query parameters; unknown parameters are ignored, as URLs often carry extras."""


class QueryQuery(CriteriaQuery, forbid_unknown_fields=False, kw_only=True):
    selector: _Selector


class BundleBody(schemas.Model, forbid_unknown_fields=True, kw_only=True):
    deployer: bundle_options.Deployer = bundle_options.Deployer.HELM
    criteria: CriteriaBody | None = None
    recipe: Annotated[dict[str, Any] | None, msgspec.Meta(description="A recipe document; replaces criteria.")] = None
    repo: Annotated[str, msgspec.Meta(max_length=512)] = ""
    revision: Annotated[str, msgspec.Meta(max_length=256)] = bundle_options.DEFAULT_REVISION


_CRITERIA_FLAGS = ("service", "accelerator", "os", "intent", "platform", "nodes")


def _recipe_for(body: CriteriaBody) -> recipe_model.Recipe:
    flags = {name: getattr(body, name) for name in _CRITERIA_FLAGS}
    gathered = inputs.gather(flags)
    result = resolve.resolve(gathered.criteria)
    if body.strict:
        resolve.require_validated(result)
    return result


def _answer(query: QueryBody | QueryQuery) -> Response:
    value = selector.select(selector.hydrated(_recipe_for(query)), query.selector)
    return wire.respond(schemas.QueryAnswer(selector=query.selector, value=value))


def _zip(files: dict[str, bytes], executables: frozenset[str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            info = zipfile.ZipInfo(path, date_time=ZIP_EPOCH)
            info.external_attr = (0o755 if path in executables else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[path])
    return buffer.getvalue()


def register(api: FastAPI) -> None:
    recipe_answers: dict[str, Any] = {"responses": {**wire.answers(schemas.RecipeDocument), **schemas.errors(422)}}
    query_answers: dict[str, Any] = {"responses": {**wire.answers(schemas.QueryAnswer), **schemas.errors(404, 422)}}

    @api.get("/v1/recipe", tags=["configure"], openapi_extra=wire.parameters(CriteriaQuery), **recipe_answers)
    def get_recipe(criteria: Annotated[CriteriaQuery, Depends(wire.query(CriteriaQuery))]) -> Response:
        """Resolve criteria (query parameters) into a recipe."""
        return wire.respond(_recipe_for(criteria).to_dict())

    @api.post("/v1/recipe", tags=["configure"], openapi_extra=wire.request(CriteriaBody), **recipe_answers)
    def post_recipe(body: Annotated[CriteriaBody, Depends(wire.body(CriteriaBody))]) -> Response:
        """Resolve criteria (JSON body) into a recipe."""
        return wire.respond(_recipe_for(body).to_dict())

    @api.get("/v1/query", tags=["configure"], openapi_extra=wire.parameters(QueryQuery), **query_answers)
    def get_query(query: Annotated[QueryQuery, Depends(wire.query(QueryQuery))]) -> Response:
        """One value of the hydrated recipe; a missing path is 404 naming the deepest prefix."""
        return _answer(query)

    @api.post("/v1/query", tags=["configure"], openapi_extra=wire.request(QueryBody), **query_answers)
    def post_query(body: Annotated[QueryBody, Depends(wire.body(QueryBody))]) -> Response:
        """One value of the hydrated recipe (criteria and selector in a JSON body)."""
        return _answer(body)

    @api.post(
        "/v1/bundle",
        tags=["configure"],
        response_class=Response,
        responses={
            200: {
                "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
                "description": "The bundle as a zip archive; the same input gives the same bytes.",
            },
            **schemas.errors(422),
        },
        openapi_extra=wire.request(BundleBody),
    )
    def post_bundle(body: Annotated[BundleBody, Depends(wire.body(BundleBody))]) -> Response:
        """Render a bundle (zip) from criteria or a recipe document."""
        if body.recipe is not None:
            recipe = recipe_model.Recipe.from_dict(body.recipe, source="request body: recipe")
        else:
            recipe = _recipe_for(body.criteria or CriteriaBody())
        options = bundle_options.BundleOptions(repo_url=body.repo, revision=body.revision)
        tree = bundle_render.render(recipe, body.deployer, options)
        archive = _zip(dict(tree.files), tree.executables)
        name = f"{recipe.metadata.name}-{body.deployer.value}.zip"
        return Response(
            archive, media_type="application/zip", headers={"content-disposition": f'attachment; filename="{name}"'}
        )
