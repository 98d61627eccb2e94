"""/v1/recipe, /v1/query and /v1/bundle: the configure half of dsx over HTTP."""

from __future__ import annotations

import io
import zipfile
from typing import Annotated, Any

from fastapi import Body, FastAPI, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from dsx.api import schemas
from dsx.bundles import options as bundle_options
from dsx.bundles import render as bundle_render
from dsx.model import criteria
from dsx.model import recipe as recipe_model
from dsx.recipes import inputs, resolve, selector

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
"""Fixed zip entry time so the same recipe gives the same archive bytes."""


def _dimension(name: str) -> Any:
    """A criteria field whose documented values come from the one table (`criteria.DIMENSIONS`)."""
    allowed = criteria.DIMENSIONS[name]
    return Field(default=None, max_length=32, description=f"One of {criteria.describe(name)}.", examples=[allowed[0]])


class CriteriaBody(BaseModel):
    """Criteria as JSON; the same keys and allowed values as the CLI flags."""

    model_config = ConfigDict(extra="forbid")

    service: str | None = _dimension("service")
    accelerator: str | None = _dimension("accelerator")
    os: str | None = _dimension("os")
    intent: str | None = _dimension("intent")
    platform: str | None = _dimension("platform")
    nodes: int | None = Field(default=None, ge=1, le=100_000)
    strict: bool = False


class QueryBody(CriteriaBody):
    selector: str = Field(min_length=1, max_length=512, examples=["components.gpu-operator.values.driver.version"])


class CriteriaQuery(CriteriaBody):
    """The same criteria as query parameters; unknown parameters are ignored, as URLs often carry extras."""

    model_config = ConfigDict(extra="ignore")


class QueryQuery(QueryBody):
    model_config = ConfigDict(extra="ignore")


class BundleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    deployer: bundle_options.Deployer = bundle_options.Deployer.HELM
    criteria: CriteriaBody | None = None
    recipe: dict[str, Any] | None = Field(default=None, description="A recipe document; replaces criteria.")
    repo: str = Field(default="", max_length=512)
    revision: str = Field(default=bundle_options.DEFAULT_REVISION, max_length=256)


def _recipe_for(body: CriteriaBody) -> recipe_model.Recipe:
    flags = body.model_dump(exclude={"strict", "selector"})
    gathered = inputs.gather(flags)
    result = resolve.resolve(gathered.criteria)
    if body.strict:
        resolve.require_validated(result)
    return result


def _answer(query: QueryBody) -> dict[str, Any]:
    return {"selector": query.selector, "value": selector.select(selector.hydrated(_recipe_for(query)), query.selector)}


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
    recipe_answers: dict[str, Any] = {"response_model": schemas.RecipeDocument, "responses": schemas.errors(422)}
    query_answers: dict[str, Any] = {"response_model": schemas.QueryAnswer, "responses": schemas.errors(404, 422)}

    @api.get("/v1/recipe", tags=["configure"], **recipe_answers)
    def get_recipe(criteria: Annotated[CriteriaQuery, Query()]) -> dict[str, Any]:
        """Resolve criteria (query parameters) into a recipe."""
        return _recipe_for(criteria).to_dict()

    @api.post("/v1/recipe", tags=["configure"], **recipe_answers)
    def post_recipe(body: CriteriaBody = Body(...)) -> dict[str, Any]:
        """Resolve criteria (JSON body) into a recipe."""
        return _recipe_for(body).to_dict()

    @api.get("/v1/query", tags=["configure"], **query_answers)
    def get_query(query: Annotated[QueryQuery, Query()]) -> dict[str, Any]:
        """One value of the hydrated recipe; a missing path is 404 naming the deepest prefix."""
        return _answer(query)

    @api.post("/v1/query", tags=["configure"], **query_answers)
    def post_query(body: QueryBody = Body(...)) -> dict[str, Any]:
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
    )
    def post_bundle(body: BundleBody = Body(...)) -> Response:
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
