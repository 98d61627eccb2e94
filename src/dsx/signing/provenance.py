"""SLSA provenance v1 predicates for what dsx generates: bundles and recipe files.

The builder is dsx itself at its version; external parameters are what a user chose (criteria,
deployer, repository) and the recipe digest, so a verifier can tell not only that the bytes
are intact but what they were generated for. Timestamps appear only when the caller passes
one (SOURCE_DATE_EPOCH), keeping signed statements reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
BUNDLE_BUILD_TYPE = "https://dsx.run/bundle/v1"
RECIPE_BUILD_TYPE = "https://dsx.run/recipe/v1"
BUILDER_ID = "https://dsx.run/builder/dsx"


def builder(generator: str) -> dict[str, Any]:
    """`dsx/0.1.0` → builder id with the version, and the version map SLSA suggests."""
    version = generator.split("/", 1)[1] if "/" in generator else generator
    return {"id": f"{BUILDER_ID}@{version}", "version": {"dsx": version}}


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
