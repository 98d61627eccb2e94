"""Recipe → bundle file tree: the deployer's files plus the recipe copy, bundle.json and checksums.

The finishing steps are the same for every deployer, so the guarantees hold for all five:
the recipe copy is covered by the checksums, `bundle.json` lists every covered file, and the
result depends only on the recipe and the options. Overrides (`--set`, node placement) change
the values the deployer writes, never the recipe copy: `bundle.json` records them beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dsx import serialization
from dsx.bundles import argocd, argocd_helm, components, flux, helm, helmfile, overrides
from dsx.bundles.options import BundleOptions, Deployer
from dsx.errors import InternalError
from dsx.file_tree import FileTree
from dsx.model import bundle_layout as layout
from dsx.model import checksums
from dsx.model.recipe import Recipe

RENDERERS: dict[Deployer, Callable[[Recipe, BundleOptions], FileTree]] = {
    Deployer.HELM: helm.render,
    Deployer.ARGOCD: argocd.render,
    Deployer.ARGOCD_HELM: argocd_helm.render,
    Deployer.FLUX: flux.render,
    Deployer.HELMFILE: helmfile.render,
}


def manifest(recipe: Recipe, deployer: Deployer, options: BundleOptions, files: list[str]) -> dict[str, Any]:
    """The content of bundle.json: what this bundle is and which files belong to it."""
    doc: dict[str, Any] = {
        "schema": layout.BUNDLE_SCHEMA,
        "deployer": deployer.value,
        "generator": options.generator,
        "recipe": {
            "name": recipe.metadata.name,
            "digest": options.recipe_digest or recipe.content_digest(),
            "criteria": recipe.metadata.criteria,
            "file": layout.RECIPE_COPY,
        },
        "components": list(recipe.deployment_order),
    }
    if options.overrides:
        doc["overrides"] = options.overrides.to_dict()
    if options.repo_url:
        doc["repository"] = {"url": options.repo_url, "revision": options.revision, "path": options.repo_path}
    if options.created_at is not None:
        doc["createdAt"] = options.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    doc["files"] = files
    return doc


def render(recipe: Recipe, deployer: Deployer, options: BundleOptions | None = None) -> FileTree:
    options = options or BundleOptions()
    components.check_recipe(recipe)
    digest = recipe.content_digest()  # once: the canonical JSON of a large recipe takes milliseconds
    options = replace(options, recipe_digest=digest)
    tree = RENDERERS[deployer](overrides.apply(recipe, options.overrides), options)
    reserved = [p for p in tree.files if not layout.is_covered(p) or p in (layout.MANIFEST, layout.RECIPE_COPY)]
    if reserved:
        raise InternalError(f"deployer {deployer.value} wrote reserved paths {reserved}")
    files = dict(tree.files)
    copy = replace(recipe, metadata=replace(recipe.metadata, digest=digest))  # recipe.with_digest()
    files[layout.RECIPE_COPY] = serialization.dump_yaml(copy.to_dict()).encode("utf-8")
    for path in files:
        checksums.check_path(path, source=f"{deployer.value} bundle")
    doc = manifest(recipe, deployer, options, sorted(files))
    files[layout.MANIFEST] = serialization.dump_json(doc).encode("utf-8")
    files[layout.CHECKSUMS] = checksums.format_checksums(files)
    return FileTree(dict(sorted(files.items())), tree.executables)
