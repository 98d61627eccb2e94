"""Deployment: every component of the recipe is installed at its pinned version, in its
namespace, and healthy on live objects.

Installed means a Helm release (read from Helm's storage in the snapshot) of the pinned chart
version with status `deployed`, or — for components not installed by Helm — a workload in the
namespace running an image tagged with the pinned version. Healthy means the component's
`healthCheckAsserts` hold (dsx.model.health_asserts) and no pod in its namespace has a
container stuck waiting (CrashLoopBackOff, ImagePullBackOff, …), whatever the pod phase says,
and every Secret and ConfigMap its workloads' pods need exists. A `Lease` assert (a controller
holding its leader election) is judged at the snapshot's capture time: pod readiness alone can
be simulated, a renewed Lease cannot.

Against a snapshot file without a live cluster, Deployment/StatefulSet/DaemonSet asserts are
held against the snapshot's workload counters and the rest are skipped with the reason. What
could not be read (a Secret list RBAC denied when the snapshot was taken, a Pod list denied
now) makes the checks that need it `skipped` with the reason: never "not installed".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dsx.model import health_asserts, recipe, snapshot
from dsx.validation import reading, results

PHASE = results.Phase.DEPLOYMENT
_API_VERSIONS = {
    health_asserts.AssertKind.DEPLOYMENT: "apps/v1",
    health_asserts.AssertKind.STATEFUL_SET: "apps/v1",
    health_asserts.AssertKind.DAEMON_SET: "apps/v1",
    health_asserts.AssertKind.POD: "v1",
    health_asserts.AssertKind.CRD: "apiextensions.k8s.io/v1",
    health_asserts.AssertKind.LEASE: "coordination.k8s.io/v1",
}
_COUNTED = frozenset(
    {health_asserts.AssertKind.DEPLOYMENT, health_asserts.AssertKind.STATEFUL_SET, health_asserts.AssertKind.DAEMON_SET}
)
RELEASE_FACTS = ("Secret objects",)
"""The snapshot's `unreadable` facts that hide Helm releases and workloads (cluster_snapshot records them)."""
WORKLOAD_FACTS = ("Deployment objects", "DaemonSet objects", "StatefulSet objects")


def check(
    target: recipe.Recipe, snap: snapshot.Snapshot, live: reading.LiveObjects | None
) -> list[results.CheckResult]:
    out: list[results.CheckResult] = []
    judged_at = _capture_time(snap.captured_at)
    for component in target.ordered_components():
        verdict = installed(component, snap.cluster)
        if verdict is not None:
            out.append(verdict)
        out.extend(health(component, snap.cluster, live, judged_at=judged_at))
    for namespace in sorted({c.namespace for c in target.component_refs}):
        owners = sorted(c.name for c in target.component_refs if c.namespace == namespace)
        out.append(namespace_pods(namespace, owners, live))
    return out


def same_version(installed_version: str, pinned: str) -> bool:
    """Equal up to a leading `v` (charts and image tags spell it both ways)."""
    return installed_version.strip().lower().removeprefix("v") == pinned.strip().lower().removeprefix("v")


def image_tag(image: str) -> str:
    """`nvcr.io/nvidia/gpu-operator:v25.10.1@sha256:…` → `v25.10.1`; empty when untagged."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def defined_by_crds(component: recipe.ComponentRef) -> bool:
    """A component whose every assert is a CRD: it installs APIs, not workloads."""
    checks = component.health_check_asserts
    return bool(checks) and all(a.kind is health_asserts.AssertKind.CRD for a in checks)


def installed(component: recipe.ComponentRef, cluster: snapshot.ClusterFacts | None) -> results.CheckResult | None:
    name = f"deployment/{component.name}/installed"
    if cluster is None:
        return results.skipped(name, PHASE, f"{component.name}: the snapshot has no cluster facts")
    where = f"namespace {component.namespace}"
    if component.type is recipe.ComponentType.HELM:
        release = cluster.release(component.name, component.namespace) or next(
            (r for r in cluster.helm_releases if r.namespace == component.namespace and r.chart == component.chart),
            None,
        )
        if release is not None:
            evidence: dict[str, Any] = {"release": f"{release.namespace}/{release.name}", "chart": release.chart}
            evidence |= {"version": release.version, "revision": release.revision, "status": release.status}
            label = f"Helm release {release.namespace}/{release.name} (chart {release.chart} {release.version})"
            if not same_version(release.version, component.version):
                return results.failed(
                    name, PHASE, f"{component.name}: {label}, recipe pins {component.version}", **evidence
                )
            if release.status != "deployed":
                return results.failed(name, PHASE, f"{component.name}: {label} has status {release.status}", **evidence)
            return results.passed(name, PHASE, f"{component.name}: {label} deployed", **evidence)
    elsewhere = [r for r in cluster.helm_releases if r.name == component.name and r.namespace != component.namespace]
    if elsewhere:
        found = ", ".join(f"{r.namespace}/{r.name} {r.version}" for r in elsewhere)
        return results.failed(
            name,
            PHASE,
            f"{component.name}: installed in another namespace ({found}), recipe says {component.namespace}",
        )
    tagged = [
        (w, image)
        for w in cluster.workloads
        if w.namespace == component.namespace
        for image in w.images
        if same_version(image_tag(image), component.version)
    ]
    if tagged:
        workload, image = tagged[0]
        return results.passed(
            name,
            PHASE,
            f"{component.name}: {workload.kind} {workload.namespace}/{workload.name} runs {image}",
            workload=f"{workload.kind}/{workload.namespace}/{workload.name}",
            image=image,
        )
    if component.type is not recipe.ComponentType.HELM and defined_by_crds(component):
        return None  # nothing runs; its CRD asserts say whether it is installed
    read_from = (*RELEASE_FACTS, *WORKLOAD_FACTS) if component.type is recipe.ComponentType.HELM else WORKLOAD_FACTS
    unread = cluster.unread(*read_from)
    if unread:
        return results.skipped(name, PHASE, f"{component.name}: cannot tell whether installed: {unread}")
    images = sorted({i for w in cluster.workloads if w.namespace == component.namespace for i in w.images})
    if component.type is recipe.ComponentType.HELM:
        detail = f"not installed: no Helm release {component.name} in {where}"
        detail += f" and no workload image tagged {component.version}"
    else:
        detail = f"not installed: no workload in {where} runs an image tagged {component.version}"
    return results.failed(name, PHASE, f"{component.name}: {detail}", images_in_namespace=images)


def _capture_time(captured_at: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(captured_at.replace("Z", "+00:00")) if captured_at else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def health(
    component: recipe.ComponentRef,
    cluster: snapshot.ClusterFacts | None,
    live: reading.LiveObjects | None,
    *,
    judged_at: datetime | None = None,
) -> list[results.CheckResult]:
    out = []
    for declared in component.health_check_asserts:
        check = declared.in_namespace(component.namespace)
        subject = check.name or ",".join(f"{k}={v}" for k, v in sorted(check.selector.items())) or "*"
        name = f"deployment/{component.name}/{check.kind.value}/{subject}"
        if check.kind is health_asserts.AssertKind.LEASE and (live is None or judged_at is None):
            why = "needs a live cluster (--kubeconfig)" if live is None else "the snapshot has no capture time"
            out.append(results.skipped(name, PHASE, f"{check.describe()}: {why}", source="none"))
            continue
        if live is not None:
            try:
                verdict = health_asserts.evaluate(check, _objects_for(check, live), now=judged_at)
            except reading.DENIED as exc:
                out.append(results.skipped(name, PHASE, f"{check.describe()}: cannot read: {exc}", source="none"))
                continue
            source = "live cluster"
        elif (
            cluster is not None and check.kind in _COUNTED and (unread := cluster.unread(f"{check.kind.value} objects"))
        ):
            out.append(results.skipped(name, PHASE, f"{check.describe()}: cannot read: {unread}", source="none"))
            continue
        elif cluster is not None and check.kind in _COUNTED:
            verdict = health_asserts.evaluate(check, _counter_objects(check, cluster))
            source = "snapshot counters (pods not checked)"
        else:
            out.append(
                results.skipped(name, PHASE, f"{check.describe()}: needs a live cluster (--kubeconfig)", source="none")
            )
            continue
        status = results.Status.PASSED if verdict.healthy else results.Status.FAILED
        out.append(
            results.CheckResult(
                name,
                PHASE,
                status,
                verdict.message,
                {"assert": check.to_dict(), "result": verdict.status.value, "source": source},
            )
        )
        if live is not None and check.kind in health_asserts.WORKLOAD_KINDS:
            out.append(references(name, check, live))
    return out


def references(name: str, check: health_asserts.HealthCheckAssert, live: reading.LiveObjects) -> results.CheckResult:
    """The workload's pods can start: every Secret and ConfigMap they need exists in its namespace."""
    name = f"{name}/references"
    try:
        workloads = live.objects(_API_VERSIONS[check.kind], check.kind.value, check.namespace)
        target = next((w for w in workloads if (w.get("metadata") or {}).get("name") == check.name), None)
        if target is None:
            return results.skipped(name, PHASE, f"{check.describe()}: not found, references not checked")
        pool = live.objects("v1", "Secret", check.namespace) + live.objects("v1", "ConfigMap", check.namespace)
    except reading.DENIED as exc:
        return results.skipped(name, PHASE, f"{check.describe()}: references not checked: cannot read: {exc}")
    missing = health_asserts.missing_references(target, pool)
    if missing:
        listed = ", ".join(missing)
        return results.failed(
            name,
            PHASE,
            f"{check.describe()}: its pods need {listed}, not found in {check.namespace}: a new pod will not start",
            missing=missing,
        )
    return results.passed(name, PHASE, f"{check.describe()}: every Secret and ConfigMap its pods need exists")


def _objects_for(check: health_asserts.HealthCheckAssert, live: reading.LiveObjects) -> list[dict[str, Any]]:
    if check.kind is health_asserts.AssertKind.CRD:
        return live.objects(_API_VERSIONS[check.kind], check.kind.value)
    if check.kind is health_asserts.AssertKind.LEASE:
        return live.objects(_API_VERSIONS[check.kind], check.kind.value, check.namespace)
    objects = live.objects("v1", "Pod", check.namespace)
    if check.kind is not health_asserts.AssertKind.POD:
        objects = objects + live.objects(_API_VERSIONS[check.kind], check.kind.value, check.namespace)
    if check.kind is health_asserts.AssertKind.DAEMON_SET:
        objects = objects + live.objects("v1", "Node")
    return objects


def _counter_objects(check: health_asserts.HealthCheckAssert, cluster: snapshot.ClusterFacts) -> list[dict[str, Any]]:
    """Workload objects rebuilt from the snapshot's desired/ready counters."""
    out: list[dict[str, Any]] = []
    for w in cluster.workloads:
        if w.kind != check.kind.value or w.namespace != check.namespace:
            continue
        meta = {"name": w.name, "namespace": w.namespace}
        if w.kind == "DaemonSet":
            out.append(
                {
                    "kind": w.kind,
                    "metadata": meta,
                    "status": {"desiredNumberScheduled": w.desired, "numberReady": w.ready},
                }
            )
        else:
            out.append(
                {
                    "kind": w.kind,
                    "metadata": meta,
                    "spec": {"replicas": w.desired},
                    "status": {"availableReplicas": w.ready},
                }
            )
    return out


def namespace_pods(namespace: str, owners: list[str], live: reading.LiveObjects | None) -> results.CheckResult:
    """No pod in the namespace is stuck; pods of Jobs are left to their Jobs."""
    name = f"deployment/namespace/{namespace}/pods"
    if live is None:
        return results.skipped(name, PHASE, f"pods in {namespace}: needs a live cluster (--kubeconfig)")
    try:
        pods = [p for p in live.objects("v1", "Pod", namespace) if not _owned_by_job(p)]
    except reading.DENIED as exc:
        return results.skipped(name, PHASE, f"pods in {namespace}: cannot read: {exc}", components=owners)
    if not pods:
        return results.skipped(name, PHASE, f"no pods in namespace {namespace}", components=owners)
    problems = {}
    for pod in pods:
        problem = health_asserts.pod_problem(pod)
        if problem:
            problems[f"{namespace}/{_name(pod)}"] = problem
    if problems:
        listed = "; ".join(f"pod {pod}: {problem}" for pod, problem in sorted(problems.items()))
        return results.failed(name, PHASE, listed, components=owners, pods=dict(sorted(problems.items())))
    count = f"{len(pods)} pod{'s' if len(pods) != 1 else ''}"
    return results.passed(name, PHASE, f"{count} in {namespace} healthy", components=owners, pods=len(pods))


def _owned_by_job(pod: Mapping[str, Any]) -> bool:
    return any(o.get("kind") == "Job" for o in (pod.get("metadata") or {}).get("ownerReferences") or [])


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
