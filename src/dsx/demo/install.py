"""Make a simulated cluster show what an installed recipe looks like, so validation has something real to read.

`dsx sim` runs no containers, so the demo cannot hand its Argo CD bundle to Argo CD. It does
the next most honest thing: it creates the objects an installation leaves behind and nothing
more — a Helm release record per Helm component (a Secret in Helm's storage format, at the
pinned chart version with the recipe's values), the CRDs, Deployments, StatefulSets and
DaemonSets the component's health asserts name (their pods are run by kwok on the GPU nodes),
and a Manifest component's own manifests as they are, plus what the operator creates by hand
before installing: the two Secrets the dsx-sentinel chart's README asks for (`SENTINEL_SECRETS`).
Validation then judges these objects with the same code it uses on a real cluster (which also
checks that the Secrets a workload needs exist). Everything carries `demo.dsx.run/installed=true`.

Beside the recipe, a GPU workload is placed on every node (one 8-GPU pod per node, with a
PodDisruptionBudget), so the sentinel's drain has something to evict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsx import errors, retry, serialization
from dsx.kube.client import KubeClient
from dsx.model import health_asserts
from dsx.model import recipe as recipe_model
from dsx.validation import cluster_snapshot, helm_storage, results, run

INSTALLED_LABEL = "demo.dsx.run/installed"
IMAGE_REGISTRY = "registry.invalid/dsx-demo"
"""`.invalid` can never resolve: nobody can mistake these images for something to pull."""

SENTINEL_SECRETS = {"dsx-sentinel-store": "url", "dsx-sentinel-tokens": "tokens"}
"""The Secrets (and their keys) an operator creates before installing dsx-sentinel (its README)."""
SENTINEL_SECRET_VALUES = {"url": "postgresql://dsx@postgres.invalid:5432/dsx", "tokens": "demo-stand-in-never-read"}
"""What the demo's Secrets hold: kwok runs the chart's pods without containers, so nothing reads
them; the demo's own sentinel runs in-process with its own store and tokens."""

WORKLOAD_NAMESPACE = "training"
WORKLOAD_NAME = "llm-pretrain"
WORKLOAD_GPUS_PER_POD = 8
WORKLOAD_MAX_UNAVAILABLE = 1
GENERATOR = "dsx demo"

CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "StorageClass",
        "PriorityClass",
        "RuntimeClass",
        "IngressClass",
        "CSIDriver",
        "PersistentVolume",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
    }
)

_KNOWN_KINDS = {"clusterpolicies.nvidia.com": "ClusterPolicy"}
"""CRDs whose kind is not the capitalised singular of their plural (the snapshot reads ClusterPolicy)."""


@dataclass(frozen=True)
class Plan:
    """The objects to create, in order: namespaces and CRDs first, then releases and workloads."""

    namespaces: tuple[str, ...]
    crds: tuple[dict[str, Any], ...]
    objects: tuple[dict[str, Any], ...]

    @property
    def releases(self) -> int:
        return sum(
            1 for o in self.objects if o["kind"] == "Secret" and o.get("type") == helm_storage.RELEASE_STORAGE_TYPE
        )

    @property
    def workloads(self) -> int:
        return sum(1 for o in self.objects if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet"))


def _labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {INSTALLED_LABEL: "true", **(extra or {})}


def _singular(plural: str) -> str:
    if plural.endswith("ies"):
        return plural[:-3] + "y"
    return plural.removesuffix("s")


def crd(name: str, *, version: str = "v1", kind: str | None = None, namespaced: bool | None = None) -> dict[str, Any]:
    """A CustomResourceDefinition that accepts any object (the demo stores, never reconciles).

    Without `namespaced`, a plural starting with `cluster` is read as cluster-scoped.
    """
    plural, _, group = name.partition(".")
    if not group:
        raise errors.BadInputError(f"CRD name {name!r} is not <plural>.<group>")
    singular = _singular(plural)
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "labels": _labels()},
        "spec": {
            "group": group,
            "names": {
                "plural": plural,
                "singular": singular,
                "kind": kind or _KNOWN_KINDS.get(name) or singular.capitalize(),
            },
            "scope": "Namespaced"
            if (namespaced if namespaced is not None else not plural.startswith("cluster"))
            else "Cluster",
            "versions": [{"name": version, "served": True, "storage": True, "schema": schema}],
        },
    }


def workload(
    kind: str, namespace: str, name: str, image: str, *, pod_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A Deployment, StatefulSet or DaemonSet whose pods tolerate every taint (as operators' do)."""
    match = {"app.kubernetes.io/name": name, **(pod_labels or {})}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": match},
        "template": {
            "metadata": {"labels": match},
            "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "main", "image": image}]},
        },
    }
    if kind != "DaemonSet":
        spec["replicas"] = 1
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": _labels()},
        "spec": spec,
    }


def _manifest_objects(component: recipe_model.ComponentRef) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for filename, text in sorted(component.manifests.items()):
        for document in serialization.parse_yaml_documents(text, source=f"{component.name}/{filename}"):
            if not isinstance(document, dict) or not document.get("kind"):
                continue
            obj = dict(document)
            metadata = dict(obj.get("metadata") or {})
            metadata["labels"] = {**(metadata.get("labels") or {}), **_labels()}
            obj["metadata"] = metadata
            found.append(obj)
    return found


@dataclass(frozen=True)
class _CustomKind:
    version: str
    kind: str
    namespaced: bool


def _custom_kinds(objects: Iterable[Mapping[str, Any]]) -> dict[str, _CustomKind]:
    """CRD name (`<plural>.<group>`) → the custom resource kind among manifests, for its CRD.

    The plural is the kind lower-cased and pluralised, so two kinds of one group (TrainJob and
    ClusterTrainingRuntime) each find their own CRD. A manifest that gives its custom resource
    no namespace is read as cluster-scoped, since nothing else (Argo CD, kubectl) would be able
    to place it either.
    """
    kinds = {}
    for obj in objects:
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        if _is_custom(group):
            kind = str(obj["kind"])
            namespaced = bool(obj["metadata"].get("namespace"))
            kinds[f"{_plural(kind.lower())}.{group}"] = _CustomKind(version, kind, namespaced)
    return kinds


def _plural(singular: str) -> str:
    if singular.endswith("y") and singular[-2:-1] not in ("a", "e", "i", "o", "u"):
        return singular[:-1] + "ies"
    return singular + ("es" if singular.endswith("s") else "s")


def _is_custom(group: str) -> bool:
    return "." in group and not group.endswith(".k8s.io")


def _place(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Give a namespaced object without a namespace the component's, as Argo CD's destination does."""
    group = str(obj["apiVersion"]).rpartition("/")[0]
    if obj["metadata"].get("namespace") or obj["kind"] in CLUSTER_SCOPED_KINDS or _is_custom(group):
        return obj
    return {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return str(obj["kind"]), str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"])


def plan(recipe: recipe_model.Recipe) -> Plan:
    """What an installation of `recipe` leaves in a cluster (pure: no cluster is contacted)."""
    namespaces: list[str] = []
    crds: dict[str, dict[str, Any]] = {}
    objects: list[dict[str, Any]] = []

    def namespace(name: str) -> None:
        if name and name not in namespaces:
            namespaces.append(name)

    components = [recipe.component(name) for name in recipe.deployment_order]
    manifests_of = {c.name: _manifest_objects(c) for c in components}
    custom = _custom_kinds(obj for found in manifests_of.values() for obj in found)
    for component in components:
        namespace(component.namespace)
        image = f"{IMAGE_REGISTRY}/{component.name}:{component.version}"
        manifests = manifests_of[component.name]
        if component.type is recipe_model.ComponentType.HELM:
            record = helm_storage.build_release(
                name=component.name,
                namespace=component.namespace,
                chart=component.chart,
                version=component.version,
                values=component.values,
            )
            secret = helm_storage.encode_secret(record)
            secret["metadata"]["labels"] = {**secret["metadata"]["labels"], **_labels()}
            objects.append(secret)
        placed = [_place(obj, component.namespace) for obj in manifests]
        written = {
            (str(o["kind"]), str(o["metadata"].get("namespace") or ""), str(o["metadata"]["name"])) for o in placed
        }
        runs_pods = False
        pod_selector: dict[str, str] = {}
        for check in component.health_check_asserts:
            if check.kind is health_asserts.AssertKind.CRD:
                found = custom.get(check.name)
                crds.setdefault(
                    check.name,
                    crd(check.name, version=found.version, kind=found.kind, namespaced=found.namespaced)
                    if found
                    else crd(check.name),
                )
            elif check.kind is health_asserts.AssertKind.POD:
                pod_selector.update(check.selector)
            elif check.kind is health_asserts.AssertKind.LEASE:
                continue  # taken by the running component itself (the demo's sentinel), never laid down
            else:
                namespace(check.namespace)
                if (check.kind.value, check.namespace, check.name) not in written:
                    # a workload the component's manifests write is applied once, as written: a second,
                    # different copy would start a rollout that the health wait can pass halfway through
                    objects.append(workload(check.kind.value, check.namespace, check.name, image))
                runs_pods = True
        for obj in placed:
            namespace(str(obj["metadata"].get("namespace") or ""))
            objects.append(obj)
        if component.name == "dsx-sentinel":
            objects += sentinel_secrets(component.namespace)
        runs_pods = runs_pods or any(kind in ("Deployment", "StatefulSet", "DaemonSet") for kind, _, _ in written)
        crd_only = bool(component.health_check_asserts) and all(
            c.kind is health_asserts.AssertKind.CRD for c in component.health_check_asserts
        )
        if not runs_pods and (pod_selector or not crd_only):
            objects.append(workload("Deployment", component.namespace, component.name, image, pod_labels=pod_selector))
    namespace(WORKLOAD_NAMESPACE)
    objects += gpu_workload()
    return Plan(tuple(namespaces), tuple(crds[name] for name in sorted(crds)), tuple(objects))


def sentinel_secrets(namespace: str) -> list[dict[str, Any]]:
    """The README's `kubectl create secret generic` steps, as objects."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": _labels()},
            "type": "Opaque",
            "stringData": {key: SENTINEL_SECRET_VALUES[key]},
        }
        for name, key in SENTINEL_SECRETS.items()
    ]


def gpu_workload(replicas: int = 8) -> list[dict[str, Any]]:
    """A training Deployment taking all 8 GPUs of each node it runs on, and its disruption budget."""
    match = {"app.kubernetes.io/name": WORKLOAD_NAME}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": WORKLOAD_NAME, "namespace": WORKLOAD_NAMESPACE, "labels": _labels()},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": match},
            "template": {
                "metadata": {"labels": match},
                "spec": {
                    "containers": [
                        {
                            "name": "trainer",
                            "image": f"{IMAGE_REGISTRY}/{WORKLOAD_NAME}:1.0",
                            "resources": {
                                "limits": {"nvidia.com/gpu": str(WORKLOAD_GPUS_PER_POD)},
                                "requests": {"nvidia.com/gpu": str(WORKLOAD_GPUS_PER_POD)},
                            },
                        }
                    ]
                },
            },
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": WORKLOAD_NAME, "namespace": WORKLOAD_NAMESPACE, "labels": _labels()},
        "spec": {"maxUnavailable": WORKLOAD_MAX_UNAVAILABLE, "selector": {"matchLabels": match}},
    }
    return [deployment, budget]


def apply(kube: KubeClient, planned: Plan) -> None:
    """Create (or converge) everything in the plan; idempotent, so a rerun on a kept cluster is safe."""
    for name in planned.namespaces:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": _labels()}})
    existing = {c["metadata"]["name"] for c in kube.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")}
    for definition in planned.crds:
        if definition["metadata"]["name"] not in existing:
            kube.create_crd(definition)
    for obj in planned.objects:
        kube.apply(obj, force=True)


def deployment_report(recipe: recipe_model.Recipe, kube: KubeClient) -> results.Report:
    snap = cluster_snapshot.collect(kube, generator=GENERATOR)
    return run.validate(recipe, snap, phases=[results.Phase.DEPLOYMENT], reader=kube, generator=GENERATOR)


def wait_healthy(
    recipe: recipe_model.Recipe,
    kube: KubeClient,
    *,
    timeout_seconds: float,
    poll_seconds: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
) -> results.Report:
    """Poll the deployment phase until it passes; DeadlineExceededError lists what still fails."""
    for _ in retry.attempts(timeout_seconds=timeout_seconds, backoff=retry.Backoff(poll_seconds), clock=clock):
        report = deployment_report(recipe, kube)
        if not report.failed:
            return report
    failing = [f"{r.name}: {r.message}" for r in report.results if r.status is results.Status.FAILED]
    raise errors.DeadlineExceededError(
        f"installed components not healthy after {timeout_seconds:.0f} s: " + "; ".join(failing[:3])
    )
