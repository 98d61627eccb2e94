"""POST /v1/validate: a recipe held against a snapshot document (offline phases)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Body, FastAPI
from pydantic import BaseModel, ConfigDict, Field

from dsx import __version__
from dsx.api import schemas
from dsx.model import recipe as recipe_model
from dsx.model import snapshot as snapshot_model
from dsx.validation import reports, results, run

if TYPE_CHECKING:
    from dsx.api.app import ApiSettings


class ValidateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipe: dict[str, Any] = Field(description="A recipe document (as `dsx recipe` writes it).")
    snapshot: dict[str, Any] = Field(description="A snapshot document (as `dsx snapshot` writes it).")
    phases: list[results.Phase] = Field(
        default_factory=lambda: [results.Phase.READINESS, results.Phase.DEPLOYMENT, results.Phase.CONFORMANCE],
        max_length=4,
    )


def register(api: FastAPI, settings: ApiSettings) -> None:
    @api.post("/v1/validate", tags=["configure"], response_model=schemas.ValidationReport)
    def post_validate(body: ValidateBody = Body(...)) -> dict[str, Any]:
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
        return reports.ctrf(report)
