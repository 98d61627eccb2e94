"""SLSA provenance v1 predicates for what dsx generates: bundles and recipe files.

The builder is dsx itself at its version; external parameters are what a user chose (criteria,
deployer, repository) and the recipe digest, so a verifier can tell not only that the bytes
are intact but what they were generated for. Timestamps appear only when the caller passes
one (SOURCE_DATE_EPOCH), keeping signed statements reproducible.

Freshness (a rolled-back bundle or recipe must not verify as current): `dsx sign` records when it
signed (`runDetails.metadata.finishedOn`) and, when given one, the publisher's monotonic revision
(`externalParameters.revision`); `dsx verify --min-revision/--not-before/--state` holds a
statement to them (`freshness_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
BUNDLE_BUILD_TYPE = "https://dsx.run/bundle/v1"
RECIPE_BUILD_TYPE = "https://dsx.run/recipe/v1"
BUILDER_ID = "https://dsx.run/builder/dsx"


def builder(generator: str) -> dict[str, Any]:
    """`dsx/0.1.0` → builder id with the version, and the version map SLSA suggests."""
    version = generator.split("/", 1)[1] if "/" in generator else generator
    return {"id": f"{BUILDER_ID}@{version}", "version": {"dsx": version}}


@dataclass(frozen=True)
class Freshness:
    """What a signature says about its age: the publisher's revision and when it was signed."""

    revision: int | None = None
    signed_at: datetime | None = None
    """UTC, whole seconds."""

    def stamp(self, predicate: Mapping[str, Any]) -> dict[str, Any]:
        """The predicate with the revision and the signing time written in."""
        out = {**predicate}
        definition = {**out.get("buildDefinition", {})}
        if self.revision is not None:
            definition["externalParameters"] = {**definition.get("externalParameters", {}), "revision": self.revision}
        out["buildDefinition"] = definition
        if self.signed_at is not None:
            details = {**out.get("runDetails", {})}
            details["metadata"] = {**details.get("metadata", {}), "finishedOn": format_time(self.signed_at)}
            out["runDetails"] = details
        return out


def format_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time as `format_time` writes it (or with an offset); None when it is not one."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def freshness_of(predicate: Mapping[str, Any]) -> Freshness:
    """The revision and signing time a verified predicate carries (None where it carries none or junk)."""
    definition = predicate.get("buildDefinition")
    external = definition.get("externalParameters") if isinstance(definition, Mapping) else None
    revision = external.get("revision") if isinstance(external, Mapping) else None
    details = predicate.get("runDetails")
    metadata = details.get("metadata") if isinstance(details, Mapping) else None
    finished = metadata.get("finishedOn") if isinstance(metadata, Mapping) else None
    signed_at = parse_time(finished) if isinstance(finished, str) else None
    valid_revision = revision if isinstance(revision, int) and not isinstance(revision, bool) else None
    return Freshness(valid_revision, signed_at)


def _run_details(generator: str, created_at: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"builder": builder(generator)}
    if created_at:
        details["metadata"] = {"startedOn": created_at, "finishedOn": created_at}
    return details


def bundle_predicate(manifest: Mapping[str, Any], recipe_sha256: str) -> dict[str, Any]:
    """Provenance of a bundle, read from its bundle.json and the digest of its recipe copy."""
    recipe = manifest.get("recipe", {})
    external: dict[str, Any] = {
        "criteria": recipe.get("criteria", {}),
        "recipeDigest": recipe.get("digest", ""),
        "deployer": manifest.get("deployer", ""),
    }
    if "repository" in manifest:
        external["repository"] = manifest["repository"]
    generator = str(manifest.get("generator", "dsx"))
    return {
        "buildDefinition": {
            "buildType": BUNDLE_BUILD_TYPE,
            "externalParameters": external,
            "internalParameters": {"generator": generator, "components": manifest.get("components", [])},
            "resolvedDependencies": [
                {"name": str(recipe.get("file", "recipe.yaml")), "digest": {"sha256": recipe_sha256}}
            ],
        },
        "runDetails": _run_details(generator, manifest.get("createdAt")),
    }


def recipe_predicate(recipe_document: Mapping[str, Any], generator: str, created_at: str | None) -> dict[str, Any]:
    """Provenance of a resolved recipe file: its criteria, overlays and content digest."""
    metadata = recipe_document.get("metadata", {})
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return {
        "buildDefinition": {
            "buildType": RECIPE_BUILD_TYPE,
            "externalParameters": {
                "criteria": metadata.get("criteria", {}),
                "recipeDigest": metadata.get("digest", ""),
            },
            "internalParameters": {
                "generator": metadata.get("generator", ""),
                "overlays": metadata.get("overlays", []),
            },
        },
        "runDetails": _run_details(generator, created_at),
    }
