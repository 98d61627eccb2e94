"""Area of concern: what the demo lays down as "installed" matches the recipe it stands in for.

Validation judges the simulated installation with its real checks, so the plan must carry
every Helm release at its pinned version, every workload and CRD the health asserts name, a
Manifest component's own objects, and a GPU workload for the drain to act on.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsx import serialization
from dsx.demo import install
from dsx.model import criteria as criteria_model
from dsx.model import health_asserts
from dsx.model import recipe as recipe_model
from dsx.recipes import resolve
from dsx.validation import helm_storage


@pytest.fixture(scope="module")
def recipe() -> recipe_model.Recipe:
    query = criteria_model.Criteria(
        service="eks", accelerator="h100", os="ubuntu", intent="training", platform="kubeflow"
    )
    return resolve.resolve(query)


@pytest.fixture(scope="module")
def plan(recipe: recipe_model.Recipe) -> install.Plan:
    return install.plan(recipe)


def objects_of(plan: install.Plan, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in plan.objects if o["kind"] == kind}


def test_every_helm_component_has_a_release_record_at_its_pin(recipe: recipe_model.Recipe, plan: install.Plan) -> None:
    secrets = objects_of(plan, "Secret")
    helm = [c for c in recipe.component_refs if c.type is recipe_model.ComponentType.HELM]
    assert helm and plan.releases == len(helm)
    for component in helm:
        secret = secrets[(component.namespace, f"sh.helm.release.v1.{component.name}.v1")]
        record = helm_storage.decode_secret_data(secret["data"]["release"], source=component.name)
        assert record["chart"]["metadata"]["version"] == component.version
        assert record["config"] == component.values


def test_every_asserted_workload_and_crd_is_planned(recipe: recipe_model.Recipe, plan: install.Plan) -> None:
    crds = {c["metadata"]["name"] for c in plan.crds}
    for component in recipe.component_refs:
        for check in component.health_check_asserts:
            if check.kind is health_asserts.AssertKind.CRD:
                assert check.name in crds
            elif check.kind is health_asserts.AssertKind.LEASE:
                assert not objects_of(plan, "Lease"), "a Lease is taken by the running sentinel, never laid down"
            elif check.kind is not health_asserts.AssertKind.POD:
                assert (check.namespace, check.name) in objects_of(plan, check.kind.value), check.describe()
    for obj in plan.objects:
        namespace = obj["metadata"].get("namespace")
        assert namespace is None or namespace in plan.namespaces, obj["metadata"]
        assert obj["metadata"]["labels"][install.INSTALLED_LABEL] == "true"


def test_pod_only_components_get_a_deployment_with_the_selected_labels(
    recipe: recipe_model.Recipe, plan: install.Plan
) -> None:
    deployments = objects_of(plan, "Deployment")
    kai = recipe.component("kai-scheduler")
    assert (kai.namespace, "kai-scheduler") in deployments
    for check in kai.health_check_asserts:
        if check.kind is health_asserts.AssertKind.POD and check.selector:
            labels = deployments[(kai.namespace, "kai-scheduler")]["spec"]["template"]["metadata"]["labels"]
            assert dict(check.selector).items() <= labels.items()


def test_manifest_components_are_applied_as_written(recipe: recipe_model.Recipe, plan: install.Plan) -> None:
    sentinel = recipe.component("dsx-sentinel")
    assert ("dsx-system", "dsx-sentinel") in objects_of(plan, "Deployment")
    assert ("", "dsx-sentinel") in objects_of(plan, "ClusterRole")
    assert ("dsx-system", "dsx-sentinel") in objects_of(plan, "ServiceAccount")
    deployment = objects_of(plan, "Deployment")[("dsx-system", "dsx-sentinel")]
    (written,) = [
        d
        for d in serialization.parse_yaml_documents(sentinel.manifests["deployment.yaml"], source="deployment.yaml")
        if d["kind"] == "Deployment"
    ]
    assert deployment["spec"] == written["spec"]


def test_custom_resource_crd_takes_version_kind_and_scope_from_the_manifest(plan: install.Plan) -> None:
    skyhook = next(c for c in plan.crds if c["metadata"]["name"] == "skyhooks.skyhook.nvidia.com")
    assert skyhook["spec"]["versions"][0]["name"] == "v1alpha1"
    assert skyhook["spec"]["names"]["kind"] == "Skyhook"
    assert skyhook["spec"]["scope"] == "Cluster"
    (tuning,) = [o for o in plan.objects if o["kind"] == "Skyhook"]
    assert "namespace" not in tuning["metadata"]


def test_two_custom_kinds_of_one_group_each_get_their_own_crd(plan: install.Plan) -> None:
    trainer = {c["metadata"]["name"]: c["spec"] for c in plan.crds if c["spec"]["group"] == "trainer.kubeflow.org"}

    assert trainer["clustertrainingruntimes.trainer.kubeflow.org"]["names"]["kind"] == "ClusterTrainingRuntime"
    assert trainer["clustertrainingruntimes.trainer.kubeflow.org"]["scope"] == "Cluster"
    kinds = [spec["names"]["kind"] for spec in trainer.values()]
    assert len(kinds) == len(set(kinds)) >= 2, kinds


def test_crd_names_without_manifests() -> None:
    policy = install.crd("clusterpolicies.nvidia.com")
    assert policy["spec"]["names"]["kind"] == "ClusterPolicy"
    assert policy["spec"]["scope"] == "Cluster"
    queue = install.crd("queues.scheduling.run.ai")
    assert (queue["spec"]["names"]["kind"], queue["spec"]["names"]["singular"]) == ("Queue", "queue")
    assert queue["spec"]["scope"] == "Namespaced"
    assert install.crd("computedomains.resource.nvidia.com")["spec"]["group"] == "resource.nvidia.com"


def test_a_crd_name_without_group_is_bad_input() -> None:
    from dsx.errors import BadInputError

    with pytest.raises(BadInputError, match=r"<plural>\.<group>"):
        install.crd("widgets")


def test_gpu_workload_fills_each_node_and_has_a_budget(plan: install.Plan) -> None:
    deployment = objects_of(plan, "Deployment")[(install.WORKLOAD_NAMESPACE, install.WORKLOAD_NAME)]
    assert deployment["spec"]["replicas"] == 8
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "8"
    budget = objects_of(plan, "PodDisruptionBudget")[(install.WORKLOAD_NAMESPACE, install.WORKLOAD_NAME)]
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] == 1


def test_images_never_resolve(plan: install.Plan) -> None:
    images = [
        c["image"]
        for o in plan.objects
        if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet")
        and o["metadata"]["name"] not in ("dsx-sentinel", "dsx-sentinel-monitor")
        for c in o["spec"]["template"]["spec"]["containers"]
    ]
    assert images and all(i.startswith("registry.invalid/") for i in images)


def test_every_object_is_planned_once(plan: install.Plan) -> None:
    """A second, different copy of a workload (an asserted one the manifests also write) would be a
    rollout right after the install, which the health wait could pass halfway through."""
    keys = [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in plan.objects]
    assert sorted(k for k in set(keys) if keys.count(k) > 1) == []
    sentinel = objects_of(plan, "DaemonSet")[("dsx-system", "dsx-sentinel-monitor")]
    assert sentinel["spec"]["template"]["spec"]["containers"][0]["image"].startswith("ghcr.io/")  # the manifest's


def test_the_plan_is_deterministic(recipe: recipe_model.Recipe, plan: install.Plan) -> None:
    again = install.plan(recipe)
    assert serialization.canonical_json([again.namespaces, again.crds, again.objects]) == serialization.canonical_json(
        [plan.namespaces, plan.crds, plan.objects]
    )


def test_the_plan_creates_what_the_sentinels_pods_need(plan: install.Plan) -> None:
    """The chart's README steps (two Secrets) are part of the plan: validation checks they exist."""
    pool = list(plan.objects)
    without = [o for o in pool if o["kind"] != "Secret" or not o["metadata"]["name"].startswith("dsx-sentinel-")]
    sentinel = objects_of(plan, "Deployment")[("dsx-system", "dsx-sentinel")]
    assert health_asserts.missing_references(sentinel, pool) == []
    assert health_asserts.missing_references(sentinel, without) == [  # the chart's pods do need them
        "Secret dsx-sentinel-store",
        "Secret dsx-sentinel-tokens",
    ]
    monitor = objects_of(plan, "DaemonSet")[("dsx-system", "dsx-sentinel-monitor")]
    assert health_asserts.missing_references(monitor, without) == []  # it posts with its pod's projected token
