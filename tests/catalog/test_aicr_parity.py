"""The catalog against NVIDIA AICR v0.11.1: the parity table in the catalog README is what the
generator writes from the saved AICR facts and dsx's own recipes, every key called dead is
reported by `dsx lint` when set, and each of the four criteria sets keeps its components."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from dsx.charts import sources
from dsx.lint import check
from dsx.model import criteria as criteria_model
from dsx.recipes import catalog, resolve

REPO = Path(__file__).resolve().parents[2]
DEVIATIONS = REPO / "tests" / "data" / "recipes" / "aicr-recipes" / "deviations.yaml"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_parity_table", REPO / "hack" / "gen-parity-table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()

EXPECTED_COMPONENTS = {
    "eks-h100-ubuntu-training-kubeflow": {
        "aws-ebs-csi-driver",
        "aws-efa",
        "cert-manager",
        "dsx-sentinel",
        "gpu-operator",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "kube-prometheus-stack",
        "kubeflow-trainer",
        "kubeflow-trainer-runtimes",
        "nvidia-dra-driver-gpu",
        "prometheus-adapter",
        "skyhook-customizations",
        "skyhook-operator",
    },
    "gke-h100-cos-training": {
        "cert-manager",
        "dsx-sentinel",
        "gke-gpu-operator-quota",
        "gke-nccl-tcpxo",
        "gpu-operator",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "kube-prometheus-stack",
        "nvidia-dra-driver-gpu",
        "prometheus-adapter",
        "skyhook-customizations",
        "skyhook-operator",
    },
    "aks-h100-ubuntu-inference-dynamo": {
        "cert-manager",
        "dsx-sentinel",
        "dynamo-crds",
        "dynamo-platform",
        "gateway-api-crds",
        "gateway-api-inference-extension-crds",
        "gpu-operator",
        "inference-gateway",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "kgateway",
        "kgateway-crds",
        "kube-prometheus-stack",
        "network-operator",
        "nvidia-dra-driver-gpu",
        "prometheus-adapter",
    },
    "kind-h100-inference": {
        "cert-manager",
        "dsx-sentinel",
        "gateway-api-crds",
        "gateway-api-inference-extension-crds",
        "gpu-operator",
        "inference-gateway",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "kgateway",
        "kgateway-crds",
        "kube-prometheus-stack",
        "nvidia-dra-driver-gpu",
        "prometheus-adapter",
    },
}
"""What each compared criteria set deploys; a dropped or added component fails here first."""


def test_parity_table_in_the_catalog_readme_is_current() -> None:
    readme = GEN.README.read_text(encoding="utf-8")

    assert GEN.splice(readme, GEN.render()) == readme, "run hack/gen-parity-table.py and commit the README"


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPONENTS))
def test_compared_criteria_set_keeps_its_components(name: str) -> None:
    recipe = resolve.resolve(criteria_model.Criteria(**GEN.SETS[name]), catalog.load())

    assert {ref.name for ref in recipe.component_refs} == EXPECTED_COMPONENTS[name]


def _dead_keys() -> list[tuple[str, str]]:
    common = yaml.safe_load(DEVIATIONS.read_text(encoding="utf-8"))["common"]
    return sorted(
        (component, key)
        for component, entries in common.items()
        for key, text in entries.items()
        if str(text).startswith("dead per lint")
    )


def test_there_are_dead_keys_to_prove() -> None:
    assert len(_dead_keys()) >= 4


@pytest.mark.parametrize(("component", "key"), _dead_keys())
def test_key_called_dead_is_reported_by_dsx_lint(component: str, key: str) -> None:
    name = next(n for n, s in GEN.SETS.items() if component in EXPECTED_COMPONENTS[n])
    recipe = resolve.resolve(criteria_model.Criteria(**GEN.SETS[name]), catalog.load())
    values: dict[str, object] = {}
    node = values
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})  # type: ignore[assignment]
    node[leaf] = True
    refs = tuple(
        dataclasses.replace(ref, values={**ref.values, **values}) if ref.name == component else ref
        for ref in recipe.component_refs
    )
    packaged = sources.DirectorySource(sources.packaged_charts(), "dsx catalog", show_root=False)

    report = check.lint_recipe(dataclasses.replace(recipe, component_refs=refs), packaged)

    parts = key.split(".")
    named = {".".join(parts[: n + 1]) + ":" for n in range(len(parts))}  # the key or the map holding it
    assert any(f.message.startswith(component) and any(n in f.message for n in named) for f in report.findings), [
        f.message for f in report.findings
    ]
