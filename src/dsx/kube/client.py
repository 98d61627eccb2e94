"""The one Kubernetes client of dsx: plain dicts in and out, dsx errors on failure.

Built explicitly from a kubeconfig file or an in-cluster service account (never a process-wide
default; `incluster.locate` is how entry points pick one), so a command, a controller and a test
can each point at a different cluster. Domain packages define the
small protocols they need (a node-operations port, a job launcher); this class is written
so those are easy to satisfy: names and namespaces in, Kubernetes JSON dicts out.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx2
import lightkube
from lightkube import generic_resource
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core import resource as lightkube_resource
from lightkube.core.exceptions import ApiError, LoadResourceError
from lightkube.core.resource_registry import resource_registry
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec, TokenReviewSpec
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.authentication_v1 import TokenReview
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod, ServiceAccountToken
from lightkube.types import CascadeType, PatchType

from dsx import errors, retry
from dsx.kube import translation, watch
from dsx.kube.incluster import InCluster

FIELD_MANAGER = "dsx"

_PATCH_TYPES = {
    "merge": PatchType.MERGE,
    "strategic": PatchType.STRATEGIC,
    "json": PatchType.JSON,
}
_CASCADE = {
    "Background": CascadeType.BACKGROUND,
    "Foreground": CascadeType.FOREGROUND,
    "Orphan": CascadeType.ORPHAN,
}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class EvictionOutcome(enum.StrEnum):
    EVICTED = "evicted"
    ALREADY_GONE = "already-gone"
    BLOCKED = "blocked"
    """A PodDisruptionBudget refused every attempt until the deadline: the pod is still running."""


@dataclass(frozen=True)
class EvictionResult:
    namespace: str
    name: str
    outcome: EvictionOutcome
    attempts: int
    message: str = ""

    @property
    def blocked(self) -> bool:
        return self.outcome is EvictionOutcome.BLOCKED


class WorkloadKind(enum.StrEnum):
    DEPLOYMENT = "Deployment"
    DAEMONSET = "DaemonSet"
    STATEFULSET = "StatefulSet"


@dataclass(frozen=True)
class WorkloadStatus:
    """Rollout progress of a Deployment, DaemonSet or StatefulSet in one shape."""

    kind: WorkloadKind
    namespace: str
    name: str
    desired: int
    ready: int
    updated: int
    available: int
    observed_current: bool
    """The controller has seen the latest spec (status.observedGeneration ≥ metadata.generation)."""

    @property
    def rolled_out(self) -> bool:
        return self.observed_current and self.desired == self.ready == self.updated == self.available


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


_METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"}
"""The apiserver answers a list with metadata alone (a server that cannot, with whole objects)."""


def _identity_only(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {"metadata": {k: metadata[k] for k in ("name", "namespace", "resourceVersion") if k in metadata}}


def _selector(labels: Mapping[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


def _lease(document: Mapping[str, Any]) -> Lease:
    return cast(Lease, Lease.from_dict(dict(document)))


def _load_config(source: Path | InCluster, context: str | None) -> SingleConfig:
    """A kubeconfig file's context, or the pod's service account (token read from its file, re-read on 401)."""
    if isinstance(source, InCluster):
        with translation.translated(f"load {source}"):
            loaded = KubeConfig.from_dict(source.kubeconfig()).get()
        assert loaded is not None  # the document names its current context
        return loaded
    if not source.is_file():
        raise errors.NotFoundError(f"{source}: kubeconfig not found")
    with translation.translated(f"load kubeconfig {source}"):
        config = KubeConfig.from_file(source).get(context)
    if config is None:
        raise errors.BadInputError(f"{source}: no current context; pass a context name")
    return config


def server_of(source: Path | InCluster, context: str | None = None) -> str:
    """The apiserver URL a kubeconfig's context (or the pod's service account) names, read without connecting."""
    return str(_load_config(source, context).cluster.server)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeClient:
    """Operations dsx performs on a cluster, against one kubeconfig context or the pod's service account."""

    def __init__(
        self,
        kubeconfig: Path | str | InCluster,
        *,
        context: str | None = None,
        field_manager: str = FIELD_MANAGER,
        request_timeout_seconds: float = 15.0,
    ) -> None:
        self.kubeconfig: Path | InCluster = kubeconfig if isinstance(kubeconfig, InCluster) else Path(kubeconfig)
        config = _load_config(self.kubeconfig, context)
        self.server = str(config.cluster.server)
        self.field_manager = field_manager
        timeout = httpx2.Timeout(request_timeout_seconds)
        with translation.translated(f"connect to {self.server}", self.server):
            self._api = lightkube.Client(config, timeout=timeout, field_manager=field_manager, lazy=False)
            self._http = client_adapter.Client(config, client_adapter.ConnectionParams(timeout=timeout))

    def close(self) -> None:
        self._api.close()
        self._http.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _seam(self, action: str) -> Any:
        return translation.translated(action, self.server)

    # ---- cluster ---------------------------------------------------------------------------

    def server_version(self) -> dict[str, Any]:
        """The apiserver's /version document (gitVersion, major, minor, platform)."""
        with self._seam("read server version"):
            response = self._http.get("/version")
            response.raise_for_status()
            body: dict[str, Any] = response.json()
        return body

    def ready(self) -> bool:
        """True when /readyz answers ok; False when it answers otherwise or not at all."""
        try:
            response = self._http.get("/readyz", timeout=5.0)
        except httpx2.HTTPError:
            return False
        return response.status_code == 200

    # ---- nodes -----------------------------------------------------------------------------

    def list_nodes(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        with self._seam("list nodes"):
            return [n.to_dict() for n in self._api.list(Node, labels=dict(labels) if labels else None)]

    def list_node_metadata(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Each node's metadata only (name, labels, annotations, resourceVersion), paged: what a
        count or a label lookup needs, without decoding 20 KB of status per node."""
        selectors = {"labelSelector": _selector(labels)} if labels else {}
        items, _ = watch.list_pages(
            self._http, "/api/v1/nodes", selectors, self.server, headers=_METADATA_ONLY, action="list nodes"
        )
        return [{"metadata": item.get("metadata") or {}} for item in items]

    def get_node(self, name: str) -> dict[str, Any]:
        with self._seam(f"get node {name}"):
            node: dict[str, Any] = self._api.get(Node, name).to_dict()
        return node

    def watch_nodes(
        self,
        labels: Mapping[str, str] | None = None,
        *,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> watch.ResourceWatch:
        """A resumable node watch; call `.sync()` then iterate `.events(timeout_seconds=...)`.

        `keep` slims the nodes the watch's view holds (`ResourceWatch.objects`)."""
        return watch.ResourceWatch(
            self._http, "/api/v1/nodes", label_selector=_selector(labels), server=self.server, keep=keep
        )

    def watch_pods(
        self, namespace: str | None = None, *, node_name: str | None = None, labels: Mapping[str, str] | None = None
    ) -> watch.ResourceWatch:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        fields = f"spec.nodeName={node_name}" if node_name else ""
        return watch.ResourceWatch(
            self._http, path, label_selector=_selector(labels), field_selector=fields, server=self.server
        )

    def watch_events(self, namespace: str, *, involved_kind: str = "") -> watch.ResourceWatch:
        """A resumable watch on core/v1 Events in one namespace (`involved_kind`: only those about that kind).

        Its view keeps each Event's name and resourceVersion only: Events are read once, not looked up."""
        fields = f"involvedObject.kind={involved_kind}" if involved_kind else ""
        return watch.ResourceWatch(
            self._http,
            f"/api/v1/namespaces/{namespace}/events",
            field_selector=fields,
            server=self.server,
            keep=_identity_only,
        )

    def cordon(self, name: str) -> bool:
        """Mark a node unschedulable. Returns False when it already was (nothing written)."""
        return self._set_unschedulable(name, True)

    def uncordon(self, name: str) -> bool:
        """Mark a node schedulable. Returns False when it already was (nothing written)."""
        return self._set_unschedulable(name, False)

    def _set_unschedulable(self, name: str, value: bool) -> bool:
        action = f"{'cordon' if value else 'uncordon'} node {name}"
        with self._seam(action):
            node = self._api.get(Node, name)
            if bool(node.spec and node.spec.unschedulable) == value:
                return False
            self._api.patch(Node, name, {"spec": {"unschedulable": value or None}}, patch_type=PatchType.MERGE)
        return True

    def taint(self, name: str, taint: Taint) -> bool:
        """Add or update a taint (identified by key and effect). Returns False when already present as given."""
        if taint.effect not in _TAINT_EFFECTS:
            raise errors.BadInputError(errors.allowed_values_message("taint", "effect", taint.effect, _TAINT_EFFECTS))

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
            kept = [t for t in taints if (t.get("key"), t.get("effect")) != (taint.key, taint.effect)]
            entry: dict[str, Any] = taint.to_dict()
            if taint.effect == "NoExecute":
                entry["timeAdded"] = _now()
            return [*kept, entry]

        def present(taints: list[dict[str, Any]]) -> bool:
            return any(
                (t.get("key"), t.get("effect"), t.get("value") or "") == (taint.key, taint.effect, taint.value)
                for t in taints
            )

        return self._update_taints(name, f"taint node {name} with {taint.key}:{taint.effect}", change, present)

    def untaint(self, name: str, key: str, effect: str | None = None) -> bool:
        """Remove taints with this key (and effect, when given). Returns False when none was present."""

        def matches(t: Mapping[str, Any]) -> bool:
            return t.get("key") == key and (effect is None or t.get("effect") == effect)

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [t for t in taints if not matches(t)]

        def absent(taints: list[dict[str, Any]]) -> bool:
            return not any(matches(t) for t in taints)

        return self._update_taints(name, f"untaint node {name} ({key})", change, absent)

    def _update_taints(
        self,
        name: str,
        action: str,
        change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
        done: Callable[[list[dict[str, Any]]], bool],
    ) -> bool:
        """Read-modify-write of spec.taints, guarded by resourceVersion; retried on conflicts."""
        for _ in range(5):
            with self._seam(action):
                node = self.get_node(name)
                taints = list(node.get("spec", {}).get("taints") or [])
                if done(taints):
                    return False
                patch = {
                    "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                    "spec": {"taints": change(taints) or None},
                }
                try:
                    self._api.patch(Node, name, patch, patch_type=PatchType.MERGE)
                except ApiError as exc:
                    if translation.status_of(exc)[0] == 409:
                        continue
                    raise
            return True
        raise errors.ConflictError(f"{action}: the node kept changing; gave up after 5 attempts")

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        """Set labels (a None value removes the label)."""
        return self.patch("v1", "Node", name, {"metadata": {"labels": dict(labels)}})

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> dict[str, Any]:
        """Set annotations (a None value removes the annotation)."""
        return self.patch("v1", "Node", name, {"metadata": {"annotations": dict(annotations)}})

    def set_node_condition(
        self, name: str, condition_type: str, status: str, *, reason: str = "", message: str = ""
    ) -> dict[str, Any]:
        """Set one node condition through the status subresource, as a node-problem detector does.

        lastTransitionTime moves only when the status changes, as the kubelet does it.
        """
        if status not in ("True", "False", "Unknown"):
            raise errors.BadInputError(
                errors.allowed_values_message("condition", "status", status, ("True", "False", "Unknown"))
            )
        action = f"set condition {condition_type}={status} on node {name}"
        with self._seam(action):
            node = self.get_node(name)
            now = _now()
            previous = next(
                (c for c in node.get("status", {}).get("conditions") or [] if c.get("type") == condition_type), None
            )
            transition = previous["lastTransitionTime"] if previous and previous.get("status") == status else now
            condition = {
                "type": condition_type,
                "status": status,
                "reason": reason or condition_type,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": transition,
            }
            updated = self._api.patch(Node.Status, name, {"status": {"conditions": [condition]}})
            result: dict[str, Any] = updated.to_dict()
        return result

    # ---- pods ------------------------------------------------------------------------------

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        node_name: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Pods in a namespace (None: all namespaces), optionally only those bound to one node."""
        where = f" on node {node_name}" if node_name else ""
        with self._seam(f"list pods{where}"):
            pods = self._api.list(
                Pod,
                namespace=namespace or "*",
                labels=dict(labels) if labels else None,
                fields={"spec.nodeName": node_name} if node_name else None,
            )
            return [p.to_dict() for p in pods]

    def pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        return self.list_pods(node_name=node_name)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.get("v1", "Pod", name, namespace)

    def evict(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        timeout_seconds: float = 60.0,
        backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 8.0,
    ) -> EvictionResult:
        """Evict through the Eviction API, which honours PodDisruptionBudgets.

        A 429 (the budget allows no disruption now) is retried with doubling backoff until
        `timeout_seconds`; if the budget never allows it the result is BLOCKED, never success.
        """
        body = Pod.Eviction(
            metadata=ObjectMeta(name=name, namespace=namespace),
            deleteOptions=DeleteOptions(gracePeriodSeconds=grace_period_seconds)
            if grace_period_seconds is not None
            else None,
        )
        backoff = retry.Backoff(backoff_seconds, factor=2.0, max_seconds=max_backoff_seconds)
        attempt, message = 0, ""
        for attempt in retry.attempts(timeout_seconds=timeout_seconds, backoff=backoff):
            refused, message = self._post_eviction(body, namespace, name)
            if refused is None:
                return EvictionResult(namespace, name, EvictionOutcome.EVICTED, attempt)
            if refused == 404:
                return EvictionResult(namespace, name, EvictionOutcome.ALREADY_GONE, attempt, message)
        return EvictionResult(namespace, name, EvictionOutcome.BLOCKED, attempt, message)

    def _post_eviction(self, body: Any, namespace: str, name: str) -> tuple[int | None, str]:
        """POST one Eviction: (None, "") when accepted, (404 or 429, message) when refused that way."""
        with self._seam(f"evict pod {namespace}/{name}"):
            try:
                self._api.create(body, name=name, namespace=namespace)
            except ApiError as exc:
                code, _, message = translation.status_of(exc)
                if code in (404, 429):
                    return code, message
                raise
        return None, ""

    def pod_logs(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> str:
        """The container's log as text (the only container when `container` is None).

        With `timestamps`, each line starts with the kubelet's RFC 3339 receive time.
        """
        with self._seam(f"read logs of pod {namespace}/{name}"):
            lines = self._api.log(
                name, namespace=namespace, container=container, tail_lines=tail_lines, timestamps=timestamps
            )
            return "".join(lines)

    def create_pod(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        return self.create(pod)

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> bool:
        return self.delete("v1", "Pod", name, namespace, grace_period_seconds=grace_period_seconds)

    def create_job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return self.create(job)

    def delete_job(self, namespace: str, name: str) -> bool:
        """Delete a Job and, in the background, its pods."""
        return self.delete("batch/v1", "Job", name, namespace, propagation="Background")

    # ---- workloads, secrets, identities, CRDs ----------------------------------------------

    def workload_status(self, kind: WorkloadKind | str, namespace: str, name: str) -> WorkloadStatus:
        kind = WorkloadKind(kind)
        obj = self.get("apps/v1", kind.value, name, namespace)
        spec, status, meta = obj.get("spec", {}), obj.get("status", {}), obj["metadata"]
        if kind is WorkloadKind.DAEMONSET:
            desired = int(status.get("desiredNumberScheduled", 0))
            ready = int(status.get("numberReady", 0))
            updated = int(status.get("updatedNumberScheduled", 0))
            available = int(status.get("numberAvailable", 0))
        else:
            desired = int(spec.get("replicas", 1))
            ready = int(status.get("readyReplicas", 0))
            updated = int(status.get("updatedReplicas", 0))
            available = int(status.get("availableReplicas", 0))
        observed = int(status.get("observedGeneration", 0)) >= int(meta.get("generation", 0))
        return WorkloadStatus(kind, namespace, name, desired, ready, updated, available, observed)

    def secret_values(self, namespace: str, name: str) -> dict[str, bytes]:
        """A Secret's data, base64-decoded."""
        secret = self.get("v1", "Secret", name, namespace)
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}

    def service_account_token(
        self,
        namespace: str,
        name: str,
        *,
        expiration_seconds: int = 3600,
        audiences: tuple[str, ...] = (),
        bound_pod: tuple[str, str] | None = None,
    ) -> str:
        """A bound token for a ServiceAccount (TokenRequest API), e.g. for a least-privilege kubeconfig;
        `bound_pod` (name, uid) binds it to a pod as a projected volume's token is (and so to its node)."""
        bound = (
            BoundObjectReference(apiVersion="v1", kind="Pod", name=bound_pod[0], uid=bound_pod[1])
            if bound_pod
            else None
        )
        request = ServiceAccountToken(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=TokenRequestSpec(
                audiences=list(audiences), expirationSeconds=expiration_seconds, boundObjectRef=bound
            ),
        )
        with self._seam(f"request a token for serviceaccount {namespace}/{name}"):
            issued = self._api.create(request, name=name, namespace=namespace)
        if issued.status is None or not issued.status.token:
            raise errors.UnavailableError(f"serviceaccount {namespace}/{name}: the apiserver issued no token")
        return str(issued.status.token)

    def review_token(self, token: str, audiences: tuple[str, ...]) -> dict[str, Any]:
        """The apiserver's verdict on a bearer token (TokenReview): the `status` document
        (authenticated, user with username and extra, audiences, error)."""
        review = TokenReview(spec=TokenReviewSpec(token=token, audiences=list(audiences)))
        with self._seam("review a token"):
            answered = self._api.create(review)
        status: dict[str, Any] = answered.to_dict().get("status") or {}
        return status

    def kubeconfig_for_token(self, token: str) -> dict[str, Any]:
        """A kubeconfig document for this cluster that authenticates with `token` (same server and CA)."""
        cluster = self._api.config.cluster
        entry: dict[str, Any] = {"server": self.server}
        if cluster.certificate_auth_data:
            entry["certificate-authority-data"] = cluster.certificate_auth_data
        elif cluster.certificate_auth:
            entry["certificate-authority"] = str(self._api.config.abs_file(cluster.certificate_auth))
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": entry}],
            "users": [{"name": "token", "user": {"token": token}}],
            "contexts": [{"name": "token", "context": {"cluster": "cluster", "user": "token"}}],
            "current-context": "token",
        }

    def declare_kind(self, api_version: str, kind: str, plural: str, *, namespaced: bool = False) -> None:
        """Make a custom kind whose CRD dsx ships usable without discovery (which lists every CRD:
        a grant the sentinel does not hold). Idempotent."""
        try:
            resource_registry.load(api_version, kind)
            return
        except LoadResourceError:
            pass
        group, version = api_version.split("/", 1)
        if namespaced:
            generic_resource.create_namespaced_resource(group, version, kind, plural)
        else:
            generic_resource.create_global_resource(group, version, kind, plural)

    def create_crd(self, crd: Mapping[str, Any], *, timeout_seconds: float = 30.0) -> dict[str, Any]:
        """Apply a CustomResourceDefinition and wait until the apiserver serves it (Established)."""
        name = crd["metadata"]["name"]
        self.apply(crd)
        for _ in retry.attempts(timeout_seconds=timeout_seconds, backoff=retry.Backoff(0.2)):
            current = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
            conditions = current.get("status", {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                with self._seam(f"register {name}"):
                    generic_resource.create_resources_from_crd(CustomResourceDefinition.from_dict(current))  # type: ignore[arg-type]
                return current
        raise errors.DeadlineExceededError(f"CRD {name} not Established after {timeout_seconds:.0f} s")

    # ---- leases (leader election, dsx.kube.leader) ------------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The coordination.k8s.io/v1 Lease, or None when there is none."""
        with self._seam(f"get lease {namespace}/{name}"):
            try:
                lease: dict[str, Any] = self._api.get(Lease, name, namespace=namespace).to_dict()
            except ApiError as exc:
                if translation.status_of(exc)[0] == 404:
                    return None
                raise
        return lease

    def create_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Lease; ConflictError when another candidate created it first."""
        namespace, name = str(lease["metadata"]["namespace"]), str(lease["metadata"]["name"])
        with self._seam(f"create lease {namespace}/{name}"):
            created: dict[str, Any] = self._api.create(_lease(lease), namespace=namespace).to_dict()
        return created

    def replace_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        """Replace a Lease at its metadata.resourceVersion (compare-and-swap); ConflictError when it moved on."""
        namespace, name = str(lease["metadata"]["namespace"]), str(lease["metadata"]["name"])
        with self._seam(f"replace lease {namespace}/{name}"):
            replaced: dict[str, Any] = self._api.replace(_lease(lease)).to_dict()
        return replaced

    # ---- generic objects -------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> Any:
        """The lightkube resource class; custom resources are discovered from the cluster's CRDs."""
        try:
            return resource_registry.load(api_version, kind)
        except LoadResourceError:
            pass
        with self._seam(f"discover {kind}.{api_version}"):
            for crd in self._api.list(CustomResourceDefinition):
                generic_resource.create_resources_from_crd(crd)
        try:
            return resource_registry.load(api_version, kind)
        except LoadResourceError as exc:
            raise errors.NotFoundError(f"the cluster serves no {kind} in {api_version}") from exc

    def _namespace_for(self, res: Any, namespace: str | None, what: str) -> str | None:
        namespaced = issubclass(res, lightkube_resource.NamespacedResource)
        if namespaced and not namespace:
            raise errors.BadInputError(f"{what}: metadata.namespace is required for a namespaced kind")
        return namespace if namespaced else None

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        res = self._resource(api_version, kind)
        where = f"{namespace}/{name}" if namespace else name
        ns = self._namespace_for(res, namespace, f"get {kind} {where}")
        with self._seam(f"get {kind} {where}"):
            obj: dict[str, Any] = self._api.get(res, name, namespace=ns).to_dict()
        return obj

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create an object from its manifest; ConflictError when it already exists."""
        res, _, namespace, what = self._identify(obj, "create")
        with self._seam(f"create {what}"):
            try:
                instance = res.from_dict(dict(obj))
            except (TypeError, ValueError) as exc:
                raise errors.BadInputError(f"create {what}: {exc}") from exc
            created: dict[str, Any] = self._api.create(instance, namespace=namespace).to_dict()
        return created

    def apply(self, obj: Mapping[str, Any], *, force: bool = False, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply as dsx's field manager: creates or converges; idempotent."""
        res, name, namespace, what = self._identify(obj, "apply")
        with self._seam(f"apply {what}"):
            applied = self._api.patch(
                res,
                name,
                dict(obj),
                namespace=namespace,
                patch_type=PatchType.APPLY,
                field_manager=self.field_manager,
                force=force,
                dry_run=dry_run,
            )
            result: dict[str, Any] = applied.to_dict()
        return result

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        status: bool = False,
    ) -> dict[str, Any]:
        """Patch an object (merge, strategic or json patch); `status`: its status subresource."""
        if patch_type not in _PATCH_TYPES:
            raise errors.BadInputError(errors.allowed_values_message("patch", "type", patch_type, _PATCH_TYPES))
        res = self._resource(api_version, kind)
        where = f"{namespace}/{name}" if namespace else name
        ns = self._namespace_for(res, namespace, f"patch {kind} {where}")
        target = res.Status if status else res
        with self._seam(f"patch {kind} {where}{' status' if status else ''}"):
            patched = self._api.patch(target, name, patch, namespace=ns, patch_type=_PATCH_TYPES[patch_type])
            result: dict[str, Any] = patched.to_dict()
        return result

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> bool:
        """Delete an object. Returns False when it did not exist (deleting is idempotent)."""
        if propagation not in _CASCADE:
            raise errors.BadInputError(errors.allowed_values_message("delete", "propagation", propagation, _CASCADE))
        res = self._resource(api_version, kind)
        where = f"{namespace}/{name}" if namespace else name
        ns = self._namespace_for(res, namespace, f"delete {kind} {where}")
        with self._seam(f"delete {kind} {where}"):
            try:
                self._api.delete(
                    res, name, namespace=ns, grace_period=grace_period_seconds, cascade=_CASCADE[propagation]
                )
            except ApiError as exc:
                if translation.status_of(exc)[0] == 404:
                    return False
                raise
        return True

    def _identify(self, obj: Mapping[str, Any], verb: str) -> tuple[Any, str, str | None, str]:
        try:
            api_version, kind = str(obj["apiVersion"]), str(obj["kind"])
            meta = obj["metadata"]
            name = str(meta["name"])
        except (KeyError, TypeError) as exc:
            raise errors.BadInputError(f"{verb}: a manifest needs apiVersion, kind and metadata.name") from exc
        namespace = meta.get("namespace")
        what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        res = self._resource(api_version, kind)
        return res, name, self._namespace_for(res, namespace, f"{verb} {what}"), what

    def wait_for(
        self,
        read: Callable[[], dict[str, Any]],
        predicate: Callable[[dict[str, Any]], bool],
        *,
        what: str,
        timeout_seconds: float = 60.0,
        interval_seconds: float = 0.25,
    ) -> dict[str, Any]:
        """Poll `read()` until `predicate` holds; DeadlineExceededError names `what` otherwise."""
        for _ in retry.attempts(timeout_seconds=timeout_seconds, backoff=retry.Backoff(interval_seconds)):
            try:
                current = read()
            except errors.NotFoundError:
                current = {}
            if current and predicate(current):
                return current
        raise errors.DeadlineExceededError(f"{what}: not reached within {timeout_seconds:.0f} s")

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind carrying all `labels`; for namespaced kinds `namespace=None` means all namespaces.

        Defined last in the class so that `list[...]` in the other signatures is the builtin.
        """
        res = self._resource(api_version, kind)
        namespaced = issubclass(res, lightkube_resource.NamespacedResource)
        with self._seam(f"list {kind}"):
            items = self._api.list(
                res, namespace=(namespace or "*") if namespaced else None, labels=dict(labels) if labels else None
            )
            return [o.to_dict() for o in items]


if TYPE_CHECKING:  # domain ports this class implements, held to them by mypy
    from dsx.validation.reading import ClusterReader

    def _implements(client: KubeClient) -> ClusterReader:
        return client
