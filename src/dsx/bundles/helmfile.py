"""Helmfile deployer: one `helmfile.yaml` with repositories and releases ordered by `needs`.

Values stay in per-component `values.yaml` files (plain YAML, not `.gotmpl`), so Helmfile never
runs a recipe value through its template engine. Manifest components are local chart
folders Helmfile turns into releases; Kustomize components are remote go-getter references.
"""

from __future__ import annotations

from typing import Any

from dsx import serialization
from dsx.bundles import components, readme
from dsx.bundles.options import BundleOptions
from dsx.file_tree import FileTree
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

HELMFILE = "helmfile.yaml"
TIMEOUT_SECONDS = 600


def _repository_url(ref: ComponentRef) -> str:
    return components.oci_registry_path(ref) if components.is_oci(ref) else ref.source


def repositories(recipe: Recipe) -> dict[str, str]:
    """Repository URL (as Helmfile spells it) → name."""
    return components.repository_names(
        _repository_url(r) for r in recipe.component_refs if r.type is ComponentType.HELM
    )


def release(ref: ComponentRef, recipe: Recipe, repo_names: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": ref.name, "namespace": ref.namespace}
    if ref.type is ComponentType.HELM:
        entry["chart"] = f"{repo_names[_repository_url(ref)]}/{ref.chart}"
        entry["version"] = ref.version
        entry["values"] = [f"{ref.name}/values.yaml"]
    elif ref.type is ComponentType.MANIFEST:
        entry["chart"] = f"./{ref.name}/manifests"
    else:
        entry["chart"] = f"git::{ref.source}@{ref.path.strip('/')}?ref={ref.version}"
    if ref.dependency_refs:
        entry["needs"] = [f"{recipe.component(d).namespace}/{d}" for d in ref.dependency_refs]
    return entry


def document(recipe: Recipe) -> dict[str, Any]:
    repo_names = repositories(recipe)
    oci_urls = {
        _repository_url(r) for r in recipe.component_refs if r.type is ComponentType.HELM and components.is_oci(r)
    }
    repos = []
    for url, name in repo_names.items():
        entry: dict[str, Any] = {"name": name, "url": url}
        if url in oci_urls:
            entry["oci"] = True
        repos.append(entry)
    doc: dict[str, Any] = {}
    if repos:
        doc["repositories"] = repos
    doc["helmDefaults"] = {"wait": True, "timeout": TIMEOUT_SECONDS, "createNamespace": True}
    doc["releases"] = [release(ref, recipe, repo_names) for ref in recipe.ordered_components()]
    return doc


def render(recipe: Recipe, options: BundleOptions) -> FileTree:
    files: dict[str, bytes] = {HELMFILE: serialization.dump_yaml(document(recipe)).encode("utf-8")}
    for ref in recipe.component_refs:
        if ref.type is ComponentType.HELM:
            files[f"{ref.name}/values.yaml"] = serialization.dump_yaml(ref.values).encode("utf-8")
        for file_name, text in sorted(ref.manifests.items()):
            files[f"{ref.name}/manifests/{file_name}"] = text.encode("utf-8")
    apply = readme.fenced(["helmfile apply     # installs in `needs` order", "helmfile destroy   # removes"])
    files["README.md"] = readme.root_readme(recipe, "helmfile", options, apply).encode("utf-8")
    return FileTree(files)
