"""Health-check asserts: what "this component is deployed and healthy" means, as data.

Each component in a recipe carries a few declarative asserts (a Deployment has its replicas
available, a DaemonSet is ready on every node it should run on, a CRD is established, pods are
not stuck). `evaluate` holds one assert against plain Kubernetes object dicts, so the live
validator (`dsx validate --phase deployment`), the simulator and the unit tests share one
verdict. A pod in phase Running whose container is waiting (CrashLoopBackOff, ImagePullBackOff,
ErrImagePull, CreateContainerConfigError, …) is not healthy.

Pod readiness can be simulated (kwok marks every pod Ready), so a component whose process proves
it works in a way only the process can (a controller holding its leader-election Lease) says so
with a `Lease` assert: held means a holder renewed it within its own lease duration, judged at a
time the caller passes in (the snapshot's capture time), so the verdict stays a pure function.
`missing_references` names the Secrets and ConfigMaps a workload's pods need that do not exist:
a pod already running keeps going without them, the next one will not start.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Annotated, Any

import msgspec

from dsx.errors import BadInputError
from dsx.model import schema


class AssertKind(enum.StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"
    DAEMON_SET = "DaemonSet"
    CRD = "CustomResourceDefinition"
    POD = "Pod"
    LEASE = "Lease"


class AssertStatus(enum.StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    MISSING = "missing"


# waiting reasons that mean a container will not start without someone changing something
STUCK_WAITING_REASONS = frozenset(
    {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "InvalidImageName"}
)
_NAMESPACED = frozenset(
    {AssertKind.DEPLOYMENT, AssertKind.STATEFUL_SET, AssertKind.DAEMON_SET, AssertKind.POD, AssertKind.LEASE}
)
WORKLOAD_KINDS = frozenset({AssertKind.DEPLOYMENT, AssertKind.STATEFUL_SET, AssertKind.DAEMON_SET})
LEASE_GRACE_SECONDS = 15.0
"""Allowed beyond a Lease's own duration before it reads as unrenewed: the renewing host's clock
and the judging one's may differ (the sentinel renews every 2 s of a 15 s lease)."""


@dataclass(frozen=True)
class HealthCheckAssert:
    """One declarative check on live objects.

    `namespace` empty means "the component's namespace" (filled in at resolution);
    `min_available_replicas` None means "all of spec.replicas"; `selector` (match labels)
    picks pods for `Pod` asserts, and a `Pod` assert with neither name nor selector covers every
    pod in the namespace.
    """

    kind: AssertKind
    name: str = ""
    namespace: str = ""
    selector: Mapping[str, str] = field(default_factory=dict)
    min_available_replicas: int | None = None
    min_pods: int = 1

    def in_namespace(self, namespace: str) -> HealthCheckAssert:
        """A copy placed in `namespace` unless it names one already (cluster-scoped stay as is)."""
        if self.kind not in _NAMESPACED or self.namespace:
            return self
        return replace(self, namespace=namespace)

    def describe(self) -> str:
        if self.kind is AssertKind.POD and not self.name:
            labels = ",".join(f"{k}={v}" for k, v in sorted(self.selector.items())) or "*"
            return f"Pod[{labels}] in {self.namespace or '?'}"
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.value} {where}{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.name:
            out["name"] = self.name
        if self.namespace:
            out["namespace"] = self.namespace
        if self.selector:
            out["selector"] = dict(sorted(self.selector.items()))
        if self.min_available_replicas is not None:
            out["minAvailableReplicas"] = self.min_available_replicas
        if self.kind is AssertKind.POD and self.min_pods != 1:
            out["minPods"] = self.min_pods
        return out

    @classmethod
    def from_dict(cls, raw: object, *, source: str) -> HealthCheckAssert:
        """Parse and check one assert; every malformation is a BadInputError naming `source`."""
        return _checked(schema.decode(raw, _AssertDoc, source=source, separator=": "), source)


_Count = Annotated[int, msgspec.Meta(ge=0)]


class _AssertDoc(schema.Section, frozen=True):
    """An assert's shape; which fields go with which kind is checked after decoding (`_checked`)."""

    kind: AssertKind
    name: str = ""
    namespace: str = ""
    selector: dict[str, str] = msgspec.field(default_factory=dict)
    min_available_replicas: _Count | None = None
    min_pods: _Count | None = None


def _checked(doc: _AssertDoc, source: str) -> HealthCheckAssert:
    kind, name = doc.kind, doc.name
    if kind is AssertKind.POD:
        pass  # neither name nor selector: every pod in the namespace
    elif not name:
        raise BadInputError(f"{source}: {kind.value} assert needs a name")
    elif doc.selector:
        raise BadInputError(f"{source}: {kind.value} {name}: selector applies to Pod asserts only")
    if kind is AssertKind.CRD:
        if doc.namespace:
            raise BadInputError(f"{source}: CustomResourceDefinition {name} is cluster-scoped; drop namespace")
        if "." not in name:
            raise BadInputError(f"{source}: CustomResourceDefinition name {name!r} is not <plural>.<group>")
    if doc.min_available_replicas is not None and kind not in (AssertKind.DEPLOYMENT, AssertKind.STATEFUL_SET):
        raise BadInputError(f"{source}: minAvailableReplicas applies to Deployment and StatefulSet only")
    if doc.min_pods is not None and kind is not AssertKind.POD:
        raise BadInputError(f"{source}: minPods applies to Pod asserts only")
    return HealthCheckAssert(
        kind=kind,
        name=name,
        namespace=doc.namespace,
        selector=doc.selector,
        min_available_replicas=doc.min_available_replicas,
        min_pods=1 if doc.min_pods is None else doc.min_pods,
    )


def parse_asserts(raw: object, *, source: str) -> tuple[HealthCheckAssert, ...]:
    """A list of asserts (`source[i]` names each one in errors); None is the empty list."""
    if raw is None:
        return ()
    docs = schema.decode(raw, list[_AssertDoc], source=source, separator="")
    return tuple(_checked(doc, f"{source}[{i}]") for i, doc in enumerate(docs))


# ---------------------------------------------------------------------------------------------
# Evaluation against plain object dicts (as returned by the API server, `kind` set on each)


@dataclass(frozen=True)
class AssertResult:
    check: HealthCheckAssert
    status: AssertStatus
    message: str

    @property
    def healthy(self) -> bool:
        return self.status is AssertStatus.HEALTHY


def evaluate(
    check: HealthCheckAssert, objects: Iterable[Mapping[str, Any]], *, now: datetime | None = None
) -> AssertResult:
    """Hold `check` against `objects`: the target itself plus, where relevant, its pods and the nodes.

    Pods are read for every namespaced kind (stuck containers make a workload unhealthy even
    when its counters look fine); nodes are read for DaemonSets to count the nodes they should
    cover. A Lease is judged at `now` (timezone-aware; required for Lease asserts).
    """
    pool = list(objects)
    if check.kind is AssertKind.POD:
        return _evaluate_pods(check, pool)
    target = _find(pool, check.kind.value, check.name, check.namespace)
    if target is None:
        return AssertResult(check, AssertStatus.MISSING, f"{check.describe()} not found")
    if check.kind is AssertKind.CRD:
        return _evaluate_crd(check, target)
    if check.kind is AssertKind.LEASE:
        if now is None:
            raise ValueError("a Lease assert is judged at a time: pass now")
        return _evaluate_lease(check, target, now)
    status = target.get("status") or {}
    spec = target.get("spec") or {}
    problem: str | None
    if check.kind is AssertKind.DAEMON_SET:
        problem = _daemon_set_problem(target, pool)
    else:
        wanted = check.min_available_replicas
        if wanted is None:
            wanted = int(spec.get("replicas", 1))
        available = int(status.get("availableReplicas", status.get("readyReplicas", 0)) or 0)
        problem = None if available >= wanted else f"{available}/{wanted} replicas available"
    stuck = _stuck_pods(_pods_of(target, pool))
    reasons = [p for p in (problem, stuck) if p]
    if reasons:
        return AssertResult(check, AssertStatus.UNHEALTHY, f"{check.describe()}: {'; '.join(reasons)}")
    return AssertResult(check, AssertStatus.HEALTHY, f"{check.describe()}: healthy")


def _evaluate_crd(check: HealthCheckAssert, crd: Mapping[str, Any]) -> AssertResult:
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Established" and condition.get("status") == "True":
            return AssertResult(check, AssertStatus.HEALTHY, f"{check.describe()}: established")
    return AssertResult(check, AssertStatus.UNHEALTHY, f"{check.describe()}: not established")


def _evaluate_lease(check: HealthCheckAssert, lease: Mapping[str, Any], now: datetime) -> AssertResult:
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if not holder:
        return AssertResult(check, AssertStatus.UNHEALTHY, f"{check.describe()}: not held (released, or never taken)")
    duration = float(spec.get("leaseDurationSeconds") or 0)
    renewed = _timestamp(spec.get("renewTime") or spec.get("acquireTime"))
    if renewed is None:
        return AssertResult(check, AssertStatus.UNHEALTHY, f"{check.describe()}: held by {holder}, never renewed")
    age = (now - renewed).total_seconds()
    if age > duration + LEASE_GRACE_SECONDS:
        return AssertResult(
            check,
            AssertStatus.UNHEALTHY,
            f"{check.describe()}: held by {holder} but last renewed {age:.0f} s ago (lease {duration:g} s):"
            " its holder stopped",
        )
    return AssertResult(check, AssertStatus.HEALTHY, f"{check.describe()}: held by {holder}, renewed {age:.0f} s ago")


def _timestamp(value: object) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def missing_references(workload: Mapping[str, Any], pool: Iterable[Mapping[str, Any]]) -> list[str]:
    """`Secret name` / `ConfigMap name` for each object the workload's pod template needs and `pool` lacks.

    Needed means not marked `optional: true`: env `valueFrom` and `envFrom`, volumes and
    projected volume sources, image pull secrets (which kubelet tolerates, so they are left out).
    """
    namespace = _meta(workload, "namespace")
    present = {
        (str(o.get("kind")), str(_meta(o, "name")))
        for o in pool
        if o.get("kind") in ("Secret", "ConfigMap") and _meta(o, "namespace") == namespace
    }
    return [f"{kind} {name}" for kind, name in needed_objects(workload) if (kind, name) not in present]


def needed_objects(workload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(`Secret` or `ConfigMap`, name) for each object the workload's pod template needs, sorted."""
    template = (((workload.get("spec") or {}).get("template") or {}).get("spec")) or {}
    return sorted(set(_required_refs(template)))


def _required_refs(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    def required(ref: Mapping[str, Any] | None, name_key: str = "name") -> str:
        if not ref or ref.get("optional") is True:
            return ""
        return str(ref.get(name_key) or "")

    containers = [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]
    for container in containers:
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if name := required(source.get("secretKeyRef")):
                yield "Secret", name
            if name := required(source.get("configMapKeyRef")):
                yield "ConfigMap", name
        for env_from in container.get("envFrom") or []:
            if name := required(env_from.get("secretRef")):
                yield "Secret", name
            if name := required(env_from.get("configMapRef")):
                yield "ConfigMap", name
    for volume in pod_spec.get("volumes") or []:
        if name := required(volume.get("secret"), "secretName"):
            yield "Secret", name
        if name := required(volume.get("configMap")):
            yield "ConfigMap", name
        for source in (volume.get("projected") or {}).get("sources") or []:
            if name := required(source.get("secret")):
                yield "Secret", name
            if name := required(source.get("configMap")):
                yield "ConfigMap", name


def _evaluate_pods(check: HealthCheckAssert, pool: list[Mapping[str, Any]]) -> AssertResult:
    pods = [
        p
        for p in pool
        if p.get("kind") == "Pod"
        and _meta(p, "namespace") == check.namespace
        and (not check.name or _meta(p, "name") == check.name)
        and labels_match(check.selector, _labels(p))
    ]
    if len(pods) < check.min_pods:
        status = AssertStatus.MISSING if not pods else AssertStatus.UNHEALTHY
        return AssertResult(check, status, f"{check.describe()}: {len(pods)} pods, want at least {check.min_pods}")
    stuck = _stuck_pods(pods)
    if stuck:
        return AssertResult(check, AssertStatus.UNHEALTHY, f"{check.describe()}: {stuck}")
    return AssertResult(check, AssertStatus.HEALTHY, f"{check.describe()}: {len(pods)} pods healthy")


def pod_problem(pod: Mapping[str, Any]) -> str | None:
    """Why a pod is not healthy, or None. Running with a waiting or unready container is unhealthy."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Unknown")
    if phase == "Succeeded":
        return None
    containers = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    for container in containers:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting is not None:
            reason = waiting.get("reason") or "waiting"
            return f"container {container.get('name', '?')} {reason}"
    if phase != "Running":
        return f"phase {phase}"
    for container in status.get("containerStatuses") or []:
        if not container.get("ready", False):
            return f"container {container.get('name', '?')} not ready"
    return None


def _stuck_pods(pods: Iterable[Mapping[str, Any]]) -> str | None:
    problems = []
    for pod in sorted(pods, key=lambda p: str(_meta(p, "name"))):
        problem = pod_problem(pod)
        if problem:
            problems.append(f"pod {_meta(pod, 'name')}: {problem}")
    return "; ".join(problems) or None


def _daemon_set_problem(ds: Mapping[str, Any], pool: list[Mapping[str, Any]]) -> str | None:
    status = ds.get("status") or {}
    desired = int(status.get("desiredNumberScheduled", 0) or 0)
    ready = int(status.get("numberReady", 0) or 0)
    nodes = [n for n in pool if n.get("kind") == "Node"]
    if nodes:
        template = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        matching = sum(1 for n in nodes if node_accepts(n, template))
        if desired < matching:
            return f"scheduled on {desired} of {matching} matching nodes"
    if ready < desired:
        return f"ready on {ready} of {desired} nodes"
    return None


def node_accepts(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Whether a DaemonSet pod with `pod_spec` belongs on `node`: nodeSelector and NoSchedule taints."""
    if not labels_match(pod_spec.get("nodeSelector") or {}, _labels(node)):
        return False
    tolerations = pod_spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration.get("key") == taint.get("key")
    return bool(toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""))


def labels_match(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A full LabelSelector (matchLabels and matchExpressions)."""
    if not labels_match(selector.get("matchLabels") or {}, labels):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _pods_of(workload: Mapping[str, Any], pool: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    selector = (workload.get("spec") or {}).get("selector") or {}
    if not selector:
        return []
    namespace = _meta(workload, "namespace")
    return [
        p
        for p in pool
        if p.get("kind") == "Pod" and _meta(p, "namespace") == namespace and _selector_matches(selector, _labels(p))
    ]


def _find(pool: list[Mapping[str, Any]], kind: str, name: str, namespace: str) -> Mapping[str, Any] | None:
    for obj in pool:
        if obj.get("kind") == kind and _meta(obj, "name") == name and (_meta(obj, "namespace") or "") == namespace:
            return obj
    return None


def _meta(obj: Mapping[str, Any], key: str) -> Any:
    return (obj.get("metadata") or {}).get(key)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = _meta(obj, "labels") or {}
    return labels
