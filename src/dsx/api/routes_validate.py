"""POST /v1/validate: a recipe held against a snapshot document (offline phases)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from fastapi import Depends, FastAPI
from fastapi.responses import Response

from dsx import __version__
from dsx.api import schemas, wire
from dsx.model import recipe as recipe_model
from dsx.model import snapshot as snapshot_model
from dsx.validation import reports, results, run

if TYPE_CHECKING:
    from dsx.api.app import ApiSettings


class ValidateBody(schemas.Model, forbid_unknown_fields=True, kw_only=True):
    recipe: Annotated[dict[str, Any], msgspec.Meta(description="A recipe document (as `dsx recipe` writes it).")]
    snapshot: Annotated[dict[str, Any], msgspec.Meta(description="A snapshot document (as `dsx snapshot` writes it).")]
    phases: Annotated[list[results.Phase], msgspec.Meta(max_length=4)] = msgspec.field(
        default_factory=lambda: [results.Phase.READINESS, results.Phase.DEPLOYMENT, results.Phase.CONFORMANCE]
    )


def register(api: FastAPI, settings: ApiSettings) -> None:
    @api.post(
        "/v1/validate",
        tags=["configure"],
        responses=wire.answers(schemas.ValidationReport),
        openapi_extra=wire.request(ValidateBody),
    )
    def post_validate(body: Annotated[ValidateBody, Depends(wire.body(ValidateBody))]) -> Response:
        """Validate against the snapshot; the answer is the CTRF report (200 even when checks fail)."""
        target = recipe_model.Recipe.from_dict(body.recipe, source="request body: recipe")
        snap = snapshot_model.Snapshot.from_dict(body.snapshot, source="request body: snapshot")
        report = run.validate(
            target,
            snap,
            phases=body.phases,
            certification_unavailable="performance runs through POST /v1/certifications",
            generator=f"dsx/{__version__}",
        )
        return wire.respond(reports.ctrf(report))
