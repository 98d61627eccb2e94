"""Flux deployer: chart sources, a HelmRelease per Helm component, ordered by `dependsOn`.

Flux orders HelmReleases only against HelmReleases and Kustomizations only against
Kustomizations, while a recipe's dependencies cross types (a Manifest custom resource needs
the CRD a chart installs). So every component gets a Flux Kustomization of its own folder,
with `dependsOn` from dependencyRefs and `wait: true`; Helm components additionally carry
`dependsOn` on their HelmRelease. The root `kustomization.yaml` ties sources, namespaces and
the per-component Kustomizations together; `sync.yaml` is the one object a user applies.
"""

from __future__ import annotations

from typing import Any

from dsx import serialization
from dsx.bundles import components, readme
from dsx.bundles.options import GITOPS_NAMESPACE_FLUX, BundleOptions
from dsx.file_tree import FileTree
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

HELM_API = "helm.toolkit.fluxcd.io/v2"
SOURCE_API = "source.toolkit.fluxcd.io/v1"
KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
KUSTOMIZE_CONFIG_API = "kustomize.config.k8s.io/v1beta1"
INTERVAL = "10m"
RECONCILE_TIMEOUT = "10m"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", GITOPS_NAMESPACE_FLUX})
PRUNE_DISABLED = {"kustomize.toolkit.fluxcd.io/prune": "disabled"}
BOOTSTRAP_SOURCE = "flux-system"
"""The GitRepository `flux bootstrap` creates; used when no `--repo` is given."""


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": GITOPS_NAMESPACE_FLUX}


def git_source_name(recipe: Recipe, options: BundleOptions) -> str:
    return components.object_name(f"dsx-{recipe.metadata.name}") if options.repo_url else BOOTSTRAP_SOURCE


def flux_path(repo_path: str) -> str:
    return "./" if repo_path == "." else f"./{repo_path}"


def oci_source_name(ref: ComponentRef) -> str:
    return components.object_name(f"{ref.name}-chart")


def helm_repository_names(recipe: Recipe) -> dict[str, str]:
    return components.repository_names(
        r.source for r in recipe.component_refs if r.type is ComponentType.HELM and not components.is_oci(r)
    )


def kustomize_source_names(recipe: Recipe, options: BundleOptions) -> dict[str, str]:
    """GitRepository name per remote Kustomize source; the bundle's own repository keeps its name."""
    names = components.repository_names(r.source for r in recipe.component_refs if r.type is ComponentType.KUSTOMIZE)
    return {
        url: git_source_name(recipe, options) if url == options.repo_url else f"git-{name}"
        for url, name in names.items()
    }


def _git_repository(name: str, url: str, revision: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": url, "interval": INTERVAL}
    if revision and revision != "HEAD":
        spec["ref"] = {"name": revision if revision.startswith("refs/") else f"refs/heads/{revision}"}
    return {"apiVersion": SOURCE_API, "kind": "GitRepository", "metadata": _meta(name), "spec": spec}


def sources(recipe: Recipe, options: BundleOptions) -> list[dict[str, Any]]:
    """Chart repositories, OCI charts and remote Kustomize repositories (not the bundle's own)."""
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": SOURCE_API,
            "kind": "HelmRepository",
            "metadata": _meta(name),
            "spec": {"url": url, "interval": INTERVAL},
        }
        for url, name in helm_repository_names(recipe).items()
    ]
    oci_refs = sorted(
        (r for r in recipe.component_refs if r.type is ComponentType.HELM and components.is_oci(r)),
        key=lambda r: r.name,
    )
    for ref in oci_refs:
        documents.append(
            {
                "apiVersion": SOURCE_API,
                "kind": "OCIRepository",
                "metadata": _meta(oci_source_name(ref)),
                "spec": {
                    "url": components.oci_chart_url(ref),
                    "ref": {"tag": ref.version},
                    "interval": INTERVAL,
                    "layerSelector": {"mediaType": HELM_CHART_LAYER, "operation": "copy"},
                },
            }
        )
    for url, name in kustomize_source_names(recipe, options).items():
        if url != options.repo_url:
            documents.append(_git_repository(name, url, None))
    return documents


def namespaces(recipe: Recipe) -> list[dict[str, Any]]:
    names = sorted({r.namespace for r in recipe.component_refs} - SYSTEM_NAMESPACES)
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "annotations": dict(PRUNE_DISABLED)}}
        for n in names
    ]


def helm_release(ref: ComponentRef, recipe: Recipe) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "interval": INTERVAL,
        "releaseName": ref.name,
        "targetNamespace": ref.namespace,
        "storageNamespace": ref.namespace,
    }
    if components.is_oci(ref):
        spec["chartRef"] = {"kind": "OCIRepository", "name": oci_source_name(ref), "namespace": GITOPS_NAMESPACE_FLUX}
    else:
        repository = helm_repository_names(recipe)[ref.source]
        spec["chart"] = {
            "spec": {
                "chart": ref.chart,
                "version": ref.version,
                "sourceRef": {"kind": "HelmRepository", "name": repository, "namespace": GITOPS_NAMESPACE_FLUX},
                "interval": INTERVAL,
            }
        }
    helm_deps = [d for d in ref.dependency_refs if recipe.component(d).type is ComponentType.HELM]
    if helm_deps:
        spec["dependsOn"] = [{"name": d} for d in helm_deps]
    spec["install"] = {"createNamespace": True, "remediation": {"retries": 3}}
    spec["upgrade"] = {"remediation": {"retries": 3}}
    spec["timeout"] = RECONCILE_TIMEOUT
    if ref.values:
        spec["values"] = ref.values
    return {"apiVersion": HELM_API, "kind": "HelmRelease", "metadata": _meta(ref.name), "spec": spec}


def component_kustomization(ref: ComponentRef, recipe: Recipe, options: BundleOptions) -> dict[str, Any]:
    """The Flux Kustomization that applies one component after its dependencies are ready."""
    if ref.type is ComponentType.KUSTOMIZE:
        source_name = kustomize_source_names(recipe, options)[ref.source]
        path = "./" + ref.path.strip("/")
    else:
        source_name = git_source_name(recipe, options)
        path = flux_path(options.repo_subpath(ref.name))
    spec: dict[str, Any] = {
        "interval": INTERVAL,
        "path": path,
        "prune": True,
        "wait": True,
        "timeout": RECONCILE_TIMEOUT,
        "sourceRef": {"kind": "GitRepository", "name": source_name},
    }
    if ref.type is ComponentType.KUSTOMIZE:  # a Manifest component's objects name their namespaces
        spec["targetNamespace"] = ref.namespace
    if ref.dependency_refs:
        spec["dependsOn"] = [{"name": d} for d in ref.dependency_refs]
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "metadata": _meta(ref.name), "spec": spec}


def sync(recipe: Recipe, options: BundleOptions) -> list[dict[str, Any]]:
    """What a user applies once: the bundle's GitRepository (with `--repo`) and the root Kustomization."""
    documents = []
    if options.repo_url:
        documents.append(_git_repository(git_source_name(recipe, options), options.repo_url, options.revision))
    documents.append(
        {
            "apiVersion": KUSTOMIZE_API,
            "kind": "Kustomization",
            "metadata": _meta(components.object_name(f"dsx-{recipe.metadata.name}")),
            "spec": {
                "interval": INTERVAL,
                "path": flux_path(options.repo_subpath()),
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": git_source_name(recipe, options)},
            },
        }
    )
    return documents


def _kustomization_file(resources: list[str]) -> bytes:
    doc = {"apiVersion": KUSTOMIZE_CONFIG_API, "kind": "Kustomization", "resources": resources}
    return serialization.dump_yaml(doc).encode("utf-8")


def render(recipe: Recipe, options: BundleOptions) -> FileTree:
    files: dict[str, bytes] = {}
    ordered = recipe.ordered_components()
    for ref in ordered:
        if ref.type is ComponentType.HELM:
            files[f"{ref.name}/helmrelease.yaml"] = serialization.dump_yaml(helm_release(ref, recipe)).encode("utf-8")
            files[f"{ref.name}/kustomization.yaml"] = _kustomization_file(["helmrelease.yaml"])
        elif ref.type is ComponentType.MANIFEST:
            names = sorted(ref.manifests)
            for file_name in names:
                files[f"{ref.name}/manifests/{file_name}"] = ref.manifests[file_name].encode("utf-8")
            files[f"{ref.name}/kustomization.yaml"] = _kustomization_file([f"manifests/{n}" for n in names])
    resources = []
    source_docs = sources(recipe, options)
    if source_docs:
        files["sources.yaml"] = serialization.dump_yaml_documents(source_docs).encode("utf-8")
        resources.append("sources.yaml")
    namespace_docs = namespaces(recipe)
    if namespace_docs:
        files["namespaces.yaml"] = serialization.dump_yaml_documents(namespace_docs).encode("utf-8")
        resources.append("namespaces.yaml")
    component_docs = [component_kustomization(ref, recipe, options) for ref in ordered]
    files["components.yaml"] = serialization.dump_yaml_documents(component_docs).encode("utf-8")
    resources.append("components.yaml")
    files["kustomization.yaml"] = _kustomization_file(resources)
    files["sync.yaml"] = serialization.dump_yaml_documents(sync(recipe, options)).encode("utf-8")
    files["README.md"] = readme.root_readme(recipe, "flux", options, _apply_section(recipe, options)).encode("utf-8")
    return FileTree(files)


def _apply_section(recipe: Recipe, options: BundleOptions) -> str:
    source = git_source_name(recipe, options)
    text = [
        f"Commit this folder to Git at `{options.repo_subpath()}`, then apply the entry point once:\n",
        readme.fenced(["kubectl apply --filename sync.yaml"]),
        "Each component is a Flux Kustomization (`components.yaml`) that waits for the components "
        "it depends on; Helm components are HelmReleases with `dependsOn`.\n",
    ]
    if not options.repo_url:
        text.insert(
            0,
            f"No `--repo` was given: the bundle is read from the `{source}` GitRepository that "
            "`flux bootstrap` creates.\n",
        )
    return "\n".join(text)
