"""Argo CD deployer: an Application per component and an app-of-apps that points at the folder.

Order is carried by `argocd.argoproj.io/sync-wave` (the component's position in
deploymentOrder), so a dependency always syncs in an earlier wave. Values are inline
(`helm.valuesObject`), so one file per component is the whole truth for that component.
"""

from __future__ import annotations

from typing import Any

from dsx import serialization
from dsx.bundles import components, readme
from dsx.bundles.options import GITOPS_NAMESPACE_ARGOCD, BundleOptions
from dsx.file_tree import FileTree
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

API_VERSION = "argoproj.io/v1alpha1"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
IN_CLUSTER = "https://kubernetes.default.svc"
APPLICATION_FILE = "application.yaml"
APP_OF_APPS_FILE = "app-of-apps.yaml"


def labels(recipe: Recipe) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "dsx",
        "app.kubernetes.io/part-of": components.object_name(recipe.metadata.name),
    }


def sync_policy(*, create_namespace: bool) -> dict[str, Any]:
    policy: dict[str, Any] = {"automated": {"prune": True, "selfHeal": True}}
    if create_namespace:
        policy["syncOptions"] = ["CreateNamespace=true"]
    policy["retry"] = {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}}
    return policy


def source(ref: ComponentRef, options: BundleOptions) -> dict[str, Any]:
    if ref.type is ComponentType.HELM:
        repo_url = components.oci_registry_path(ref) if components.is_oci(ref) else ref.source
        helm: dict[str, Any] = {"releaseName": ref.name}
        if ref.values:
            helm["valuesObject"] = ref.values
        return {"repoURL": repo_url, "chart": ref.chart, "targetRevision": ref.version, "helm": helm}
    if ref.type is ComponentType.KUSTOMIZE:
        return {"repoURL": ref.source, "targetRevision": ref.version, "path": ref.path}
    return {
        "repoURL": options.git_url,
        "targetRevision": options.revision,
        "path": options.repo_subpath(ref.name, "manifests"),
    }


def application(recipe: Recipe, ref: ComponentRef, wave: int, options: BundleOptions) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Application",
        "metadata": {
            "name": ref.name,
            "namespace": GITOPS_NAMESPACE_ARGOCD,
            "labels": labels(recipe),
            "annotations": {SYNC_WAVE: str(wave)},
            "finalizers": ["resources-finalizer.argocd.argoproj.io"],
        },
        "spec": {
            "project": "default",
            "source": source(ref, options),
            "destination": {"server": IN_CLUSTER, "namespace": ref.namespace},
            "syncPolicy": sync_policy(create_namespace=True),
        },
    }


def app_of_apps_name(recipe: Recipe) -> str:
    name = components.object_name(recipe.metadata.name)
    return name if name not in recipe.deployment_order else f"{name[:58]}-apps"


def app_of_apps(recipe: Recipe, options: BundleOptions) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Application",
        "metadata": {
            "name": app_of_apps_name(recipe),
            "namespace": GITOPS_NAMESPACE_ARGOCD,
            "labels": labels(recipe),
        },
        "spec": {
            "project": "default",
            "source": {
                "repoURL": options.git_url,
                "targetRevision": options.revision,
                "path": options.repo_subpath(),
                "directory": {"recurse": True, "include": f"*/{APPLICATION_FILE}"},
            },
            "destination": {"server": IN_CLUSTER, "namespace": GITOPS_NAMESPACE_ARGOCD},
            "syncPolicy": sync_policy(create_namespace=False),
        },
    }


def apply_section(options: BundleOptions, entry_file: str) -> str:
    steps = [
        f"Commit this folder to `{options.git_url}` at `{options.repo_subpath()}` "
        f"(revision `{options.revision}`), then apply the root application once:\n",
        readme.fenced([f"kubectl apply --namespace {GITOPS_NAMESPACE_ARGOCD} --filename {entry_file}"]),
        'OCI chart sources need a repository entry with `enableOCI: "true"` in Argo CD.\n',
    ]
    if not options.repo_url:
        steps.insert(0, "No `--repo` was given: replace the placeholder repository URL first.\n")
    return "\n".join(steps)


def render(recipe: Recipe, options: BundleOptions) -> FileTree:
    files: dict[str, bytes] = {}
    for wave, ref in enumerate(recipe.ordered_components()):
        app = application(recipe, ref, wave, options)
        files[f"{ref.name}/{APPLICATION_FILE}"] = serialization.dump_yaml(app).encode("utf-8")
        for file_name, text in sorted(ref.manifests.items()):
            files[f"{ref.name}/manifests/{file_name}"] = text.encode("utf-8")
    files[APP_OF_APPS_FILE] = serialization.dump_yaml(app_of_apps(recipe, options)).encode("utf-8")
    files["README.md"] = readme.root_readme(recipe, "argocd", options, apply_section(options, APP_OF_APPS_FILE)).encode(
        "utf-8"
    )
    return FileTree(files)
