"""Matching, application order and per-field merge rules, on the small test catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx import serialization
from dsx.errors import BadInputError, CatalogError
from dsx.model.criteria import Criteria
from dsx.recipes import catalog, resolve
from dsx.recipes.catalog import Catalog


def _names(overlays: list[catalog.Overlay]) -> list[str]:
    return [o.name for o in overlays]


def test_overlay_fields_left_out_match_any_query_value(small_catalog: Catalog) -> None:
    # `eks` names only the service, so an h100/ubuntu/training query still matches it
    applied = resolve.matching_overlays(small_catalog, Criteria(service="eks", accelerator="h100", os="ubuntu"))
    assert "eks" in _names(applied)


def test_query_any_matches_only_overlays_that_leave_the_field_unset(small_catalog: Catalog) -> None:
    applied = _names(resolve.matching_overlays(small_catalog, Criteria(service="eks")))
    assert applied == ["base", "eks"]  # not eks-training, eks-ubuntu, h100, training


def test_any_written_in_an_overlay_means_the_same_as_absent(catalog_copy: Path) -> None:
    path = catalog_copy / "overlays" / "eks.yaml"
    path.write_text(path.read_text().replace("criteria: {service: eks}", "criteria: {service: eks, os: any}"))
    written = resolve.resolve(Criteria(service="eks", os="ubuntu"), catalog.load(catalog_copy))
    assert "eks" in written.metadata.overlays


def test_application_order_is_generic_to_specific_then_dimension_rank(small_catalog: Catalog) -> None:
    query = Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training")
    assert _names(resolve.matching_overlays(small_catalog, query)) == [
        "base",
        "eks",  # service
        "h100",  # accelerator
        "ubuntu",  # os
        "training",  # intent
        "eks-ubuntu",  # service + os
        "eks-training",  # service + intent: rank (0, 3) after (0, 2)
        "eks-h100-training",
    ]


def test_values_deep_merge_with_later_overlays_winning(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks", accelerator="h100", intent="training"), small_catalog)
    alpha = recipe.component("alpha")
    # registry → eks (leaf) → h100 (list replaced whole) → eks-training (leaf again)
    assert alpha.values == {"tree": {"leaf": "eks-training", "list": ["h100"]}, "keep": True}


def test_dependency_refs_are_replaced_not_appended(small_catalog: Catalog) -> None:
    assert resolve.resolve(Criteria(service="eks"), small_catalog).component("beta").dependency_refs == ("alpha",)
    replaced = resolve.resolve(Criteria(service="eks", intent="training"), small_catalog)
    assert replaced.component("beta").dependency_refs == ()


def test_manifests_merge_by_file_name(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks", accelerator="h100", intent="training"), small_catalog)
    manifests = recipe.component("lens").manifests
    assert list(manifests) == ["one.yaml", "three.yaml", "two.yaml"]
    assert "two-eks" in manifests["two.yaml"]
    assert "name: one" in manifests["one.yaml"]


def test_enabled_false_removes_the_component(small_catalog: Catalog) -> None:
    with_lens = resolve.resolve(Criteria(service="eks", accelerator="h100"), small_catalog)
    assert "lens" in with_lens.deployment_order
    without = resolve.resolve(Criteria(service="eks", accelerator="h100", os="ubuntu"), small_catalog)
    assert "lens" not in without.deployment_order
    assert "lens" not in [r.name for r in without.component_refs]


def test_if_included_adjusts_but_never_adds(small_catalog: Catalog) -> None:
    alone = resolve.resolve(Criteria(intent="training"), small_catalog)
    assert "delta" not in alone.deployment_order
    included = resolve.resolve(Criteria(service="eks", intent="training"), small_catalog)
    # training (applied before eks-training included delta) still left its values on it
    assert included.component("delta").values == {"from": "training"}


def test_constraints_key_on_name_and_operator_and_sort(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training"), small_catalog)
    assert [c.expression() for c in recipe.constraints] == ["K8s.server.version >= 1.32", "OS.release.ID == ubuntu"]


def test_certification_categories_merge_by_name_thresholds_merge_scalars_replace(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks", accelerator="h100", intent="training"), small_catalog)
    assert recipe.certification == {
        "categories": ["first", {"name": "second", "thresholds": {"busBandwidthGBps": "value >= 2.0"}}],
        "thresholds": {"busBandwidthGBps": "value >= 1.0"},
        "interconnect": "efa",
    }
    assert resolve.resolve(Criteria(service="eks"), small_catalog).certification == {"categories": ["first"]}


def test_health_asserts_land_in_the_component_namespace(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks"), small_catalog)
    assert recipe.component("alpha").health_check_asserts[0].namespace == "alpha-system"
    assert recipe.component("beta").health_check_asserts[0].namespace == ""  # a CRD is cluster-scoped


def test_deployment_order_follows_dependencies(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks", accelerator="h100"), small_catalog)
    assert list(recipe.deployment_order) == ["alpha", "beta", "lens"]


def test_metadata_and_digest(small_catalog: Catalog) -> None:
    recipe = resolve.resolve(Criteria(service="eks", accelerator="h100", intent="training", nodes=4), small_catalog)
    assert recipe.metadata.name == "eks-h100-training"
    assert recipe.metadata.criteria["nodes"] == 4
    assert recipe.metadata.generator.startswith("dsx/")
    assert recipe.verify_digest()
    assert recipe.metadata.digest == serialization.digest(recipe.content())


@pytest.mark.parametrize(
    ("query", "unvalidated"),
    [
        (Criteria(service="eks", accelerator="h100", intent="training"), ()),
        (Criteria(service="eks", accelerator="h100", intent="training", platform="ray"), ("platform",)),
        (Criteria(service="eks", accelerator="a100", intent="training"), ("accelerator",)),
        (Criteria(intent="training"), ()),
        (Criteria(os="ubuntu", intent="training"), ("os", "intent")),
        (Criteria(service="gke"), ("service",)),
        (Criteria(), ()),
    ],
)
def test_unvalidated_criteria(small_catalog: Catalog, query: Criteria, unvalidated: tuple[str, ...]) -> None:
    assert resolve.resolve(query, small_catalog).metadata.unvalidated_criteria == unvalidated


def test_strict_lists_the_supported_combinations(small_catalog: Catalog) -> None:
    resolve.require_validated(resolve.resolve(Criteria(service="eks", intent="training"), small_catalog), small_catalog)
    loose = resolve.resolve(Criteria(service="eks", accelerator="a100", intent="training"), small_catalog)
    with pytest.raises(BadInputError) as info:
        resolve.require_validated(loose, small_catalog)
    assert "unvalidated: accelerator=a100" in str(info.value)
    assert "eks-h100-training, eks-training, eks-ubuntu" in str(info.value)
    assert info.value.exit_code == 2


def test_resolution_is_byte_identical(small_catalog: Catalog) -> None:
    query = Criteria(service="eks", accelerator="h100", intent="training")
    first = serialization.dump_yaml(resolve.resolve(query, small_catalog).to_dict())
    second = serialization.dump_yaml(resolve.resolve(query, small_catalog).to_dict())
    assert first == second


# --- a broken catalog fails at load, naming the file -----------------------------------------


def _rewrite(root: Path, name: str, old: str, new: str) -> None:
    path = next(root.rglob(f"{name}.yaml"))
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("eks-training", "base: eks", "base: nowhere", "spec.base 'nowhere' is not an overlay"),
        ("eks-training", "base: eks", "base: h100", "base 'h100' must match a strict subset"),
        ("eks", "criteria: {service: eks}", "criteria: {service: gke}", "must be named 'gke'"),
        ("eks", "criteria: {service: eks}", "criteria: {service: mars}", "allowed values: eks, gke"),
        ("eks", "criteria: {service: eks}", "criteria: {service: eks, nodes: 2}", "cannot match on nodes"),
        ("eks", "- name: beta", "- name: gamma", "component 'gamma' is not in the registry"),
        ("eks", "K8s.server.version >= 1.30", "K8s.server.version >= newest", "needs a version value"),
        ("eks", "- name: beta", "- name: beta\n      version: [1]", "componentRefs[0].version: expected a string"),
        ("eks", "- name: beta", "- name: beta\n      colour: red", "componentRefs[0]: field: 'colour' is not allowed"),
        ("alpha", "{kind: Deployment, name: alpha}", "{kind: Deployment}", "needs a name"),
        ("alpha", "name: alpha\nspec", "name: alfa\nspec", "must equal the file name 'alpha'"),
        ("lens", "[one.yaml, two.yaml]", "[one.yaml, nine.yaml]", "cannot read nine.yaml"),
        (
            "training",
            "categories: [second, first]",
            "categories: [second, 3]",
            "categories[1]: expected a string or a mapping",
        ),
        ("training", "busBandwidthGBps: value >= 1.0", "busBandwidthGBps: ''", "metric names to CEL expressions"),
        ("training", "certification:", "certification:\n    nodes: 3", "field: 'nodes' is not allowed"),
        ("eks", "  base: base", "  bass: base", "spec: field: 'bass' is not allowed; allowed values: base, criteria"),
        ("beta", "type: Helm", "type: Chart", "spec: type: 'Chart' is not allowed; allowed values: Helm, Manifest"),
        ("beta", "  namespace: beta-system\n", "", "spec.namespace: required"),
    ],
)
def test_catalog_errors_name_the_file(catalog_copy: Path, file: str, old: str, new: str, message: str) -> None:
    _rewrite(catalog_copy, file, old, new)
    with pytest.raises(CatalogError) as info:
        catalog.load(catalog_copy)
    assert message in str(info.value)
    assert f"{file}.yaml" in str(info.value)


def test_base_chain_cycle_is_named(catalog_copy: Path) -> None:
    # eks-training → eks → eks-training
    _rewrite(catalog_copy, "eks", "base: base", "base: eks-training")
    with pytest.raises(CatalogError):
        catalog.load(catalog_copy)


def test_dependency_cycle_is_a_catalog_error_naming_it(catalog_copy: Path) -> None:
    _rewrite(catalog_copy, "alpha", "dependencyRefs: []", "dependencyRefs: [beta]")
    broken = catalog.load(catalog_copy)
    with pytest.raises(CatalogError, match="dependency cycle: alpha -> beta -> alpha"):
        resolve.resolve(Criteria(service="eks"), broken)


def test_dependency_on_a_component_outside_the_recipe_names_the_edge(small_catalog: Catalog) -> None:
    with pytest.raises(CatalogError, match="lens depends on beta, which is not in the recipe"):
        resolve.resolve(Criteria(accelerator="h100"), small_catalog)
