"""Area of concern: each deployer's artifacts say what its tool needs — Argo CD sync waves in
dependency order, Flux dependsOn and pinned charts, Helmfile needs — and validate against the
upstream CRD schemas (Argo CD, Flux) and the Kubernetes OpenAPI schemas (core kinds)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from dsx.bundles.options import Deployer
from dsx.file_tree import FileTree
from dsx.model.recipe import ComponentType, Recipe

SCHEMAS = Path(__file__).resolve().parents[2] / "data" / "bundles" / "schemas"
CRD_SCHEMAS = {
    ("argoproj.io/v1alpha1", "Application"): "application-argoproj-v1alpha1.json",
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"): "helmrelease-helm-v2.json",
    ("source.toolkit.fluxcd.io/v1", "HelmRepository"): "helmrepository-source-v1.json",
    ("source.toolkit.fluxcd.io/v1", "OCIRepository"): "ocirepository-source-v1.json",
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"): "kustomization-kustomize-v1.json",
}
KUBERNETES_VERSION = "1.35.0"
# kinds with no schema in hand: the kustomize build file and Flux's GitRepository
UNCHECKED = {("kustomize.config.k8s.io/v1beta1", "Kustomization"), ("source.toolkit.fluxcd.io/v1", "GitRepository")}


def _documents(bundle: FileTree) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, data in sorted(bundle.files.items()):
        if path.endswith(".yaml") and not path.startswith("templates/") and path != "recipe.yaml":
            for document in yaml.safe_load_all(data):
                if isinstance(document, dict) and "kind" in document:
                    yield path, document


def _validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text(encoding="utf-8")))


@pytest.mark.parametrize("deployer", [Deployer.ARGOCD, Deployer.ARGOCD_HELM, Deployer.FLUX])
def test_generated_objects_validate_against_their_schemas(
    deployer: Deployer, render_bundle: Callable[..., FileTree]
) -> None:
    seen = set()
    for path, document in _documents(render_bundle(deployer, repo_url="https://git.example.org/ops/gpu.git")):
        key = (document["apiVersion"], document["kind"])
        if path.startswith("skyhook-customizations/manifests/") or key in UNCHECKED:
            continue
        seen.add(key)
        if key in CRD_SCHEMAS:
            errors = sorted(_validator(CRD_SCHEMAS[key]).iter_errors(document), key=str)
            assert not errors, f"{path}: {errors[0].message} at {list(errors[0].absolute_path)}"
        else:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    assert seen


def test_schema_check_catches_a_misspelt_field(render_bundle: Callable[..., FileTree]) -> None:
    app = yaml.safe_load(render_bundle(Deployer.ARGOCD).files["gpu-operator/application.yaml"])
    app["spec"]["source"]["targetRevison"] = "v1"
    assert list(_validator(CRD_SCHEMAS[("argoproj.io/v1alpha1", "Application")]).iter_errors(app))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"a": 1}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(namespace, KUBERNETES_VERSION, strict=True)


def test_argocd_sync_waves_follow_dependencies(small_recipe: Recipe, render_bundle: Callable[..., FileTree]) -> None:
    bundle = render_bundle(Deployer.ARGOCD)
    waves = {}
    for ref in small_recipe.component_refs:
        app = yaml.safe_load(bundle.files[f"{ref.name}/application.yaml"])
        wave = app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
        assert isinstance(wave, str)
        waves[ref.name] = int(wave)
        assert "CreateNamespace=true" in app["spec"]["syncPolicy"]["syncOptions"]
    assert sorted(waves.values()) == list(range(len(waves)))
    for ref in small_recipe.component_refs:
        for dep in ref.dependency_refs:
            assert waves[dep] < waves[ref.name], (dep, ref.name)


def test_argocd_application_pins_chart_and_inlines_values(
    small_recipe: Recipe, render_bundle: Callable[..., FileTree]
) -> None:
    bundle = render_bundle(Deployer.ARGOCD, repo_url="https://git.example.org/ops/gpu.git", revision="release-1")
    gpu = yaml.safe_load(bundle.files["gpu-operator/application.yaml"])
    source = gpu["spec"]["source"]
    assert (source["chart"], source["repoURL"], source["targetRevision"]) == (
        "gpu-operator",
        "https://helm.ngc.nvidia.com/nvidia",
        "v25.10.1",
    )
    assert source["helm"]["valuesObject"] == small_recipe.component("gpu-operator").values
    assert gpu["spec"]["destination"]["namespace"] == "gpu-operator"
    kai = yaml.safe_load(bundle.files["kai-scheduler/application.yaml"])
    assert kai["spec"]["source"]["repoURL"] == "ghcr.io/nvidia/kai-scheduler"  # Argo CD spells OCI without scheme
    root = yaml.safe_load(bundle.files["app-of-apps.yaml"])
    assert root["spec"]["source"]["repoURL"] == "https://git.example.org/ops/gpu.git"
    assert root["spec"]["source"]["targetRevision"] == "release-1"
    manifests = yaml.safe_load(bundle.files["skyhook-customizations/application.yaml"])
    assert manifests["spec"]["source"]["path"] == "skyhook-customizations/manifests"


def test_flux_releases_depend_on_their_dependencies(
    small_recipe: Recipe, render_bundle: Callable[..., FileTree]
) -> None:
    bundle = render_bundle(Deployer.FLUX)
    kustomizations = {d["metadata"]["name"]: d for d in yaml.safe_load_all(bundle.files["components.yaml"])}
    for ref in small_recipe.component_refs:
        deps = [d["name"] for d in kustomizations[ref.name]["spec"].get("dependsOn", [])]
        assert deps == list(ref.dependency_refs)
        if ref.type is ComponentType.HELM:
            release = yaml.safe_load(bundle.files[f"{ref.name}/helmrelease.yaml"])
            helm_deps = [d for d in ref.dependency_refs if small_recipe.component(d).type is ComponentType.HELM]
            assert [d["name"] for d in release["spec"].get("dependsOn", [])] == helm_deps
            assert release["spec"].get("values", {}) == ref.values
    gpu = yaml.safe_load(bundle.files["gpu-operator/helmrelease.yaml"])
    assert gpu["spec"]["dependsOn"] == [{"name": "cert-manager"}]
    assert gpu["spec"]["chart"]["spec"]["version"] == "v25.10.1"
    kai = yaml.safe_load(bundle.files["kai-scheduler/helmrelease.yaml"])
    assert kai["spec"]["chartRef"]["kind"] == "OCIRepository"


def test_flux_kustomization_file_lists_existing_resources(render_bundle: Callable[..., FileTree]) -> None:
    bundle = render_bundle(Deployer.FLUX)
    folders = ["", *sorted({p.rsplit("/", 1)[0] + "/" for p in bundle.files if p.endswith("/kustomization.yaml")})]
    for folder in folders:
        build = yaml.safe_load(bundle.files[f"{folder}kustomization.yaml"])
        for resource in build["resources"]:
            assert f"{folder}{resource}" in bundle.files, (folder, resource)
    namespaces = [d["metadata"]["name"] for d in yaml.safe_load_all(bundle.files["namespaces.yaml"])]
    assert "kube-system" not in namespaces and "gpu-operator" in namespaces


def test_helmfile_releases_need_their_dependencies(
    small_recipe: Recipe, render_bundle: Callable[..., FileTree]
) -> None:
    bundle = render_bundle(Deployer.HELMFILE)
    document = yaml.safe_load(bundle.files["helmfile.yaml"])
    releases = {r["name"]: r for r in document["releases"]}
    assert [r["name"] for r in document["releases"]] == list(small_recipe.deployment_order)
    for ref in small_recipe.component_refs:
        needs = releases[ref.name].get("needs", [])
        assert needs == [f"{small_recipe.component(d).namespace}/{d}" for d in ref.dependency_refs]
    repositories = {r["name"]: r for r in document["repositories"]}
    gpu = releases["gpu-operator"]
    assert repositories[gpu["chart"].split("/")[0]]["url"] == "https://helm.ngc.nvidia.com/nvidia"
    assert gpu["version"] == "v25.10.1"
    assert yaml.safe_load(bundle.files[gpu["values"][0]]) == small_recipe.component("gpu-operator").values
    kai_repo = repositories[releases["kai-scheduler"]["chart"].split("/")[0]]
    assert kai_repo["oci"] is True


@pytest.mark.parametrize("deployer", [Deployer.HELM, Deployer.HELMFILE])
def test_yaml_11_trap_strings_stay_strings(deployer: Deployer, render_bundle: Callable[..., FileTree]) -> None:
    text = render_bundle(deployer).files["gpu-operator/values.yaml"].decode()
    for trap in ("'on'", "'NO'", "'yes'", "'1.10'", "'0755'"):
        assert trap in text
    labels = yaml.safe_load(text)["labels"]
    assert labels == {"country": "NO", "answer": "yes", "release": "1.10", "mode": "0755"}


def test_argocd_helm_chart_structure(small_recipe: Recipe, render_bundle: Callable[..., FileTree]) -> None:
    """Lint without helm: Chart.yaml fields, values per component, template reads only known values."""
    bundle = render_bundle(Deployer.ARGOCD_HELM)
    chart = yaml.safe_load(bundle.files["Chart.yaml"])
    assert chart["apiVersion"] == "v2" and chart["name"] and chart["version"]
    values = yaml.safe_load(bundle.files["values.yaml"])
    assert list(values["components"]) == list(small_recipe.deployment_order)
    for wave, name in enumerate(small_recipe.deployment_order):
        assert values["components"][name]["wave"] == wave
    assert values["components"]["gpu-operator"]["values"] == small_recipe.component("gpu-operator").values
    template = bundle.files["templates/applications.yaml"].decode()
    assert template.count("{{") == template.count("}}")
    for ref in ("$c.wave", "$c.type", "$c.namespace", "$c.values", ".Values.git.repoURL", ".Values.argocd.namespace"):
        assert ref in template
