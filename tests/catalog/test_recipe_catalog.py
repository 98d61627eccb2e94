"""Invariants of the shipped recipe catalog (src/dsx/catalog/overlays, src/dsx/catalog/components).

Every supported combination resolves and is fully validated, every version is an exact pin,
every dependency exists and the graph has no cycle, constraints and health asserts parse, and
resolution is byte-identical run to run. That the values use only keys their charts read is
checked by the real linter in test_catalog_lint.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsx import serialization
from dsx.errors import CatalogError
from dsx.model import criteria as criteria_model
from dsx.model.health_asserts import AssertKind
from dsx.model.recipe import ComponentType, Recipe
from dsx.recipes import catalog, graph, resolve

SHIPPED = catalog.load()
COMBINATIONS = [o for o in SHIPPED.overlays if o.base is not None]

# aicr.md §2.8 components, plus Kueue, dsx's operate component, KubeRay and Slinky
REQUIRED_COMPONENTS = {
    "gpu-operator": "v25.10.1",
    "network-operator": "25.1.0",
    "cert-manager": "v1.17.2",
    "nvsentinel": "v1.1.0",
    "skyhook-operator": "v0.14.0",
    "skyhook-customizations": None,
    "kube-prometheus-stack": "82.8.0",
    "prometheus-adapter": "5.3.0",
    "k8s-ephemeral-storage-metrics": "1.19.2",
    "nvidia-dra-driver-gpu": "25.12.0",
    "kai-scheduler": "v0.13.0",
    "aws-ebs-csi-driver": "2.55.0",
    "aws-efa": "v0.5.3",
    "gke-nccl-tcpxo": None,
    "kgateway-crds": "v2.0.0",
    "kgateway": "v2.0.0",
    "dynamo-crds": "0.9.0",
    "dynamo-platform": "0.9.0",
    "kubeflow-trainer": "2.1.0",
    "kueue": None,
    "dsx-sentinel": None,
    "kuberay-operator": None,
    "slurm-operator": None,
}


def _criteria(overlay: catalog.Overlay) -> criteria_model.Criteria:
    return criteria_model.Criteria(**overlay.criteria)


def _check_recipe(recipe: Recipe) -> None:
    order = list(recipe.deployment_order)
    assert sorted(order) == sorted(r.name for r in recipe.component_refs)
    for ref in recipe.component_refs:
        for dep in ref.dependency_refs:
            assert order.index(dep) < order.index(ref.name), f"{recipe.metadata.name}: {dep} after {ref.name}"


@pytest.mark.parametrize("overlay", COMBINATIONS, ids=lambda o: o.name)
def test_every_supported_combination_resolves_fully_validated(overlay: catalog.Overlay) -> None:
    recipe = resolve.resolve(_criteria(overlay), SHIPPED)
    assert recipe.metadata.overlays[-1] == overlay.name
    for member in SHIPPED.chain(overlay.name):
        assert member.name in recipe.metadata.overlays
    assert recipe.metadata.unvalidated_criteria == ()
    _check_recipe(recipe)
    resolve.require_validated(recipe, SHIPPED)


@pytest.mark.parametrize(
    ("dimension", "value"),
    [(d, v) for d, values in criteria_model.DIMENSIONS.items() for v in values if v != criteria_model.ANY],
)
def test_every_single_criterion_has_its_own_overlay(dimension: str, value: str) -> None:
    recipe = resolve.resolve(criteria_model.Criteria(**{dimension: value}), SHIPPED)
    assert recipe.metadata.overlays[-1] == value
    assert recipe.metadata.unvalidated_criteria == ()


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries({d: st.sampled_from(values) for d, values in criteria_model.DIMENSIONS.items()}),
    st.one_of(st.none(), st.integers(1, 4096)),
)
def test_any_criteria_resolve_to_an_ordered_recipe(values: dict[str, str], nodes: int | None) -> None:
    recipe = resolve.resolve(criteria_model.Criteria(**values, nodes=nodes), SHIPPED)
    _check_recipe(recipe)
    assert recipe.metadata.overlays[0] == "base"
    assert recipe.verify_digest()


def test_resolution_is_byte_identical_across_fresh_loads() -> None:
    fresh = catalog.load.__wrapped__(catalog.default_root())
    for overlay in COMBINATIONS:
        query = _criteria(overlay)
        first = serialization.dump_yaml(resolve.resolve(query, SHIPPED).to_dict())
        again = serialization.dump_yaml(resolve.resolve(query, SHIPPED).to_dict())
        other = serialization.dump_yaml(resolve.resolve(query, fresh).to_dict())
        assert first == again == other, overlay.name


def test_registry_covers_the_required_components_at_their_pins() -> None:
    for name, version in REQUIRED_COMPONENTS.items():
        assert name in SHIPPED.components, name
        if version is not None:
            assert SHIPPED.components[name].version == version, name
    assert SHIPPED.components["gpu-operator"].values["driver"]["version"] == "580.105.08"


@pytest.mark.parametrize("name", sorted(SHIPPED.components))
def test_component_is_well_formed(name: str) -> None:
    ref = SHIPPED.components[name]
    assert catalog.pin_problem(ref.version) is None
    assert ref.health_check_asserts, f"{name} has no healthCheckAsserts"
    if ref.type is ComponentType.HELM:
        assert ref.chart and ref.source.startswith(("https://", "oci://")), name
        assert not ref.manifests
    elif ref.type is ComponentType.MANIFEST:
        assert ref.manifests, name
        for file_name, text in ref.manifests.items():
            documents = serialization.parse_yaml_documents(text, source=f"{name}/{file_name}")
            assert all(isinstance(d, dict) and d.get("kind") for d in documents)
    else:
        assert ref.path and ref.source.startswith("https://"), name
    for check in ref.health_check_asserts:
        if check.kind is AssertKind.CRD:
            assert "." in check.name and not check.namespace
    for dep in ref.dependency_refs:
        assert dep in SHIPPED.components, f"{name} depends on unknown {dep}"


def test_registry_dependency_graph_has_no_cycle() -> None:
    graph.deployment_order({n: r.dependency_refs for n, r in SHIPPED.components.items()}, source="registry")


def test_every_dependency_ref_set_by_an_overlay_exists() -> None:
    for overlay in SHIPPED.overlays:
        for patch in overlay.components:
            for dep in patch.dependency_refs or ():
                assert dep in SHIPPED.components, f"{overlay.source}: {patch.name} -> {dep}"


@pytest.mark.parametrize("version", ["latest", "", ">=1.2.0", "~1.2", "^1.2", "1.2.*", "1.x", "1", "stable"])
def test_unpinned_versions_are_rejected(version: str) -> None:
    assert catalog.pin_problem(version) is not None


def test_an_unpinned_overlay_version_fails_the_load(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "catalog"
    shutil.copytree(catalog.default_root() / "overlays", root / "overlays")
    shutil.copytree(catalog.default_root() / "components", root / "components")
    eks = root / "overlays" / "services" / "eks.yaml"
    eks.write_text(eks.read_text().replace("- name: aws-efa\n", "- name: aws-efa\n      version: latest\n"))
    with pytest.raises(CatalogError, match=r"eks.yaml.*aws-efa.*version 'latest' is not an exact version"):
        catalog.load(root)


def test_every_constraint_names_a_measurement() -> None:
    for overlay in SHIPPED.overlays:
        for constraint in overlay.constraints:
            assert constraint.measurement_type in ("K8s", "GPU", "OS", "SystemD", "NodeTopology")


def test_overlay_names_and_files_follow_the_criteria() -> None:
    for overlay in COMBINATIONS:
        assert overlay.name == _criteria(overlay).name()
        assert Path(overlay.source).name == f"{overlay.name}.yaml"


def test_certification_block_is_what_the_certify_engine_reads() -> None:
    from dsx.model.certification import Certification

    for overlay in COMBINATIONS:
        recipe = resolve.resolve(_criteria(overlay), SHIPPED)
        assert recipe.certification, overlay.name
        parsed = Certification.from_dict(recipe.certification, source=overlay.name)
        names = [c.name for c in parsed.categories]
        assert "nccl-loopback" in names
        if overlay.criteria.get("intent") == "training":
            assert {"nccl-all-reduce", "training"} <= set(names), overlay.name
        if "accelerator" in overlay.criteria:
            assert parsed.accelerator == overlay.criteria["accelerator"]


def test_certification_categories_exist_in_the_certify_catalog() -> None:
    known = {p.stem for p in (catalog.default_root() / "certification").glob("*.yaml")}
    for overlay in SHIPPED.overlays:
        for entry in (overlay.certification or {}).get("categories", []):
            name = entry if isinstance(entry, str) else entry["name"]
            assert name in known, f"{overlay.source}: unknown certification category {name}"
