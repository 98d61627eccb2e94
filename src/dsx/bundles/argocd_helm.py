"""Argo CD as a Helm chart: the app-of-apps whose templates generate one Application per component.

Teams that manage Argo CD through Helm override one component's values or version with
`--set components.<name>.version=…` instead of editing files. The template is fixed text;
everything from the recipe lives in `values.yaml` and reaches the output through `quote` or
`toYaml`, so no recipe value is ever parsed as template code. Rendering it gives the same
Applications as the plain `argocd` deployer.
"""

from __future__ import annotations

from typing import Any

from dsx import __version__, serialization
from dsx.bundles import argocd, components, readme
from dsx.bundles.options import GITOPS_NAMESPACE_ARGOCD, BundleOptions
from dsx.file_tree import FileTree
from dsx.model.recipe import ComponentType, Recipe

TEMPLATE = """\
{{- range $name, $c := .Values.components }}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {{ $name | quote }}
  namespace: {{ $.Values.argocd.namespace | quote }}
  labels:
    app.kubernetes.io/managed-by: dsx
    app.kubernetes.io/part-of: {{ $.Values.recipe.partOf | quote }}
  annotations:
    argocd.argoproj.io/sync-wave: {{ $c.wave | quote }}
  finalizers:
    - resources-finalizer.argocd.argoproj.io
spec:
  project: {{ $.Values.argocd.project | quote }}
  source:
    {{- if eq $c.type "Helm" }}
    repoURL: {{ $c.repoURL | quote }}
    chart: {{ $c.chart | quote }}
    targetRevision: {{ $c.version | quote }}
    helm:
      releaseName: {{ $name | quote }}
      {{- with $c.values }}
      valuesObject:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- else if eq $c.type "Kustomize" }}
    repoURL: {{ $c.repoURL | quote }}
    targetRevision: {{ $c.version | quote }}
    path: {{ $c.path | quote }}
    {{- else }}
    repoURL: {{ $.Values.git.repoURL | quote }}
    targetRevision: {{ $.Values.git.targetRevision | quote }}
    path: {{ $c.path | quote }}
    {{- end }}
  destination:
    server: {{ $.Values.argocd.destinationServer | quote }}
    namespace: {{ $c.namespace | quote }}
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
    syncOptions:
      - CreateNamespace=true
    retry:
      limit: 5
      backoff:
        duration: 10s
        factor: 2
        maxDuration: 5m
{{- end }}
"""

HELMIGNORE = "README.md\nrecipe.yaml\nbundle.json\nchecksums.txt\nattestation/\napp-of-apps.yaml\n"


def chart_name(recipe: Recipe) -> str:
    return components.object_name(recipe.metadata.name, limit=53)


def chart_values(recipe: Recipe, options: BundleOptions) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for wave, ref in enumerate(recipe.ordered_components()):
        entry: dict[str, Any] = {"wave": wave, "type": ref.type.value, "namespace": ref.namespace}
        if ref.type is ComponentType.HELM:
            entry["repoURL"] = argocd.source(ref, options)["repoURL"]
            entry["chart"] = ref.chart
            entry["version"] = ref.version
            entry["values"] = ref.values
        elif ref.type is ComponentType.KUSTOMIZE:
            entry.update(repoURL=ref.source, version=ref.version, path=ref.path)
        else:
            entry["path"] = options.repo_subpath(ref.name, "manifests")
        entries[ref.name] = entry
    return {
        "recipe": {"name": recipe.metadata.name, "partOf": components.object_name(recipe.metadata.name)},
        "argocd": {
            "namespace": GITOPS_NAMESPACE_ARGOCD,
            "project": "default",
            "destinationServer": argocd.IN_CLUSTER,
        },
        "git": {"repoURL": options.git_url, "targetRevision": options.revision},
        "components": entries,
    }


def root_application(recipe: Recipe, options: BundleOptions) -> dict[str, Any]:
    """The one Application a user applies: Argo CD renders this chart from Git."""
    app = argocd.app_of_apps(recipe, options)
    app["spec"]["source"] = {
        "repoURL": options.git_url,
        "targetRevision": options.revision,
        "path": options.repo_subpath(),
        "helm": {"releaseName": chart_name(recipe)},
    }
    return app


def render(recipe: Recipe, options: BundleOptions) -> FileTree:
    chart = {
        "apiVersion": "v2",
        "name": chart_name(recipe),
        "description": f"Argo CD Applications for recipe {recipe.metadata.name}",
        "type": "application",
        "version": __version__,
        "appVersion": recipe.content_digest().removeprefix("sha256:")[:12],
    }
    files: dict[str, bytes] = {
        "Chart.yaml": serialization.dump_yaml(chart).encode("utf-8"),
        "values.yaml": serialization.dump_yaml(chart_values(recipe, options)).encode("utf-8"),
        "templates/applications.yaml": TEMPLATE.encode("utf-8"),
        ".helmignore": HELMIGNORE.encode("utf-8"),
        argocd.APP_OF_APPS_FILE: serialization.dump_yaml(root_application(recipe, options)).encode("utf-8"),
    }
    for ref in recipe.component_refs:
        for file_name, text in sorted(ref.manifests.items()):
            files[f"{ref.name}/manifests/{file_name}"] = text.encode("utf-8")
    apply = argocd.apply_section(options, argocd.APP_OF_APPS_FILE) + (
        "\nPreview what Argo CD will create:\n\n" + readme.fenced(["helm template . | less"])
    )
    files["README.md"] = readme.root_readme(recipe, "argocd-helm", options, apply).encode("utf-8")
    return FileTree(files)
