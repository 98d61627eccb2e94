"""Conformance: the cluster behaves like a GPU cluster the recipe can run on.

- GPU nodes advertise `nvidia.com/gpu` (and as many as GPU Feature Discovery counted);
- every pool of GPU nodes is consistent: one GPU product, driver, CUDA version and taint set;
- the device plugin runs, ready, on every GPU node, and each GPU Operator DaemonSet on every
  GPU node it selects;
- those DaemonSets tolerate the taints of the GPU nodes they select;
- dsx's own service accounts hold no cluster-admin (or wildcard) binding.

The first two need only the snapshot; the rest read live objects, and fall back to snapshot
counters or `skipped` with the reason when validating a snapshot file alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsx.model import criteria, health_asserts, recipe, snapshot
from dsx.validation import pools, reading, results

PHASE = results.Phase.CONFORMANCE
GPU_OPERATOR = "gpu-operator"
DSX_PREFIX = "dsx"
_RBAC = "rbac.authorization.k8s.io/v1"
_NO_LIVE = "needs a live cluster (--kubeconfig)"
_COVERAGE = "conformance/gpu-daemonsets-cover-gpu-nodes"
_TAINTS = "conformance/gpu-taints-tolerated"


def check(
    target: recipe.Recipe, snap: snapshot.Snapshot, live: reading.LiveObjects | None
) -> list[results.CheckResult]:
    gpu_nodes = snap.gpu_nodes
    wants_gpus = str(target.metadata.criteria.get("accelerator", criteria.ANY)) != criteria.ANY
    out = [gpu_advertised(gpu_nodes, wants_gpus), pool_consistency(gpu_nodes)]
    operator_namespace = next((c.namespace for c in target.component_refs if c.name == GPU_OPERATOR), None)
    if live is None:
        out.append(device_plugin_from_counters(gpu_nodes, snap.cluster))
        out.append(results.skipped(_TAINTS, PHASE, f"taints and tolerations: {_NO_LIVE}"))
        out.append(results.skipped("conformance/dsx-not-cluster-admin", PHASE, f"RBAC bindings: {_NO_LIVE}"))
        return out
    try:
        daemon_sets = gpu_daemon_sets(live.objects("apps/v1", "DaemonSet"), operator_namespace)
        names = {g.name for g in gpu_nodes}
        nodes = [n for n in live.objects("v1", "Node") if n.get("metadata", {}).get("name") in names]
        out.append(daemon_set_coverage(daemon_sets, nodes, live.objects("v1", "Pod")))
        out.append(taints_tolerated(daemon_sets, nodes))
    except reading.DENIED as exc:
        out.append(results.skipped(_COVERAGE, PHASE, f"cannot read DaemonSets, nodes and pods: {exc}"))
        out.append(results.skipped(_TAINTS, PHASE, f"cannot read DaemonSets and nodes: {exc}"))
    out.append(no_cluster_admin(live))
    return out


def gpu_advertised(gpu_nodes: Sequence[snapshot.Node], wants_gpus: bool) -> results.CheckResult:
    name = "conformance/gpu-advertised"
    if not gpu_nodes:
        if wants_gpus:
            return results.failed(name, PHASE, "the recipe targets GPUs but no node has NVIDIA GPUs")
        return results.skipped(name, PHASE, "no GPU nodes in the snapshot")
    problems: dict[str, str] = {}
    advertised: dict[str, str] = {}
    for node in gpu_nodes:
        count = _quantity(node.allocatable.get(snapshot.GPU_RESOURCE))
        advertised[node.name] = str(count)
        present = node.gpu.count if node.gpu is not None else None
        if count == 0:
            problems[node.name] = "allocatable nvidia.com/gpu is 0 or absent"
        elif present is not None and count < present:
            problems[node.name] = f"advertises {count} of {present} GPUs"
    if problems:
        listed = "; ".join(f"{n}: {p}" for n, p in sorted(problems.items()))
        return results.failed(name, PHASE, listed, allocatable=advertised)
    return results.passed(name, PHASE, f"{len(gpu_nodes)} GPU nodes advertise nvidia.com/gpu", allocatable=advertised)


def _quantity(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _taint_set(node: snapshot.Node) -> str:
    return ",".join(sorted(f"{t.key}={t.value}:{t.effect}" for t in node.taints)) or "(no taints)"


POOL_FACTS = (
    ("GPU product", lambda n: n.gpu_product),
    ("driver", lambda n: n.gpu_driver_version),
    ("CUDA", lambda n: n.gpu_cuda_version),
    ("taints", _taint_set),
)


def pool_consistency(gpu_nodes: Sequence[snapshot.Node]) -> results.CheckResult:
    name = "conformance/gpu-pool-consistency"
    if not gpu_nodes:
        return results.skipped(name, PHASE, "no GPU nodes in the snapshot")
    problems = []
    evidence: dict[str, Any] = {}
    for pool, nodes in pools.group(gpu_nodes).items():
        facts = {label: pools.spread(nodes, fact) for label, fact in POOL_FACTS}
        evidence[pool] = {label: spread for label, spread in facts.items()}
        problems += [
            f"pool {pool}: {label} differs: {pools.describe_spread(s)}" for label, s in facts.items() if len(s) > 1
        ]
    if problems:
        return results.failed(name, PHASE, "; ".join(problems), pools=evidence)
    return results.passed(name, PHASE, f"{len(evidence)} GPU pool(s) consistent", pools=evidence)


def gpu_daemon_sets(
    daemon_sets: Sequence[Mapping[str, Any]], operator_namespace: str | None
) -> list[Mapping[str, Any]]:
    """NVIDIA's device plugin wherever it runs, plus every DaemonSet in the GPU Operator's namespace."""
    return [
        ds
        for ds in daemon_sets
        if _is_device_plugin(ds) or (operator_namespace and _meta(ds, "namespace") == operator_namespace)
    ]


def _is_device_plugin(ds: Mapping[str, Any]) -> bool:
    """NVIDIA's device plugin under the names the GPU Operator, its Helm chart and GKE give it."""
    name = str(_meta(ds, "name"))
    return "device-plugin" in name and "nvidia" in name


def daemon_set_coverage(
    daemon_sets: Sequence[Mapping[str, Any]], gpu_nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> results.CheckResult:
    name = _COVERAGE
    if not gpu_nodes:
        return results.skipped(name, PHASE, "no GPU nodes in the cluster")
    if not any(_is_device_plugin(ds) for ds in daemon_sets):
        return results.failed(name, PHASE, "no device-plugin DaemonSet: nothing advertises nvidia.com/gpu")
    ready_on: dict[tuple[str, str], set[str]] = {}
    for pod in pods:
        for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "DaemonSet" and health_asserts.pod_problem(pod) is None:
                key = (str(_meta(pod, "namespace")), str(owner.get("name")))
                ready_on.setdefault(key, set()).add(str((pod.get("spec") or {}).get("nodeName")))
    gaps: dict[str, list[str]] = {}
    covered: dict[str, int] = {}
    for ds in daemon_sets:
        label = f"{_meta(ds, 'namespace')}/{_meta(ds, 'name')}"
        selector = _template(ds).get("nodeSelector") or {}
        expected = [
            str(_meta(n, "name"))
            for n in gpu_nodes
            if _is_device_plugin(ds) or health_asserts.labels_match(selector, _meta(n, "labels") or {})
        ]
        on = ready_on.get((str(_meta(ds, "namespace")), str(_meta(ds, "name"))), set())
        missing = sorted(set(expected) - on)
        covered[label] = len(expected) - len(missing)
        if missing:
            gaps[label] = missing
    if gaps:
        listed = "; ".join(
            f"DaemonSet {ds} has no ready pod on {', '.join(nodes)}" for ds, nodes in sorted(gaps.items())
        )
        return results.failed(name, PHASE, listed, missing=gaps, covered=covered)
    return results.passed(
        name, PHASE, f"{len(daemon_sets)} GPU DaemonSets ready on the GPU nodes they select", covered=covered
    )


def device_plugin_from_counters(
    gpu_nodes: Sequence[snapshot.Node], cluster: snapshot.ClusterFacts | None
) -> results.CheckResult:
    """Offline form: the snapshot's device-plugin DaemonSet counters against the GPU node count."""
    name = _COVERAGE
    if not gpu_nodes:
        return results.skipped(name, PHASE, "no GPU nodes in the snapshot")
    if cluster is None:
        return results.skipped(name, PHASE, "the snapshot has no cluster facts")
    unread = cluster.unread("DaemonSet objects")
    if unread:
        return results.skipped(name, PHASE, f"cannot read DaemonSets: {unread}")
    plugins = [
        w for w in cluster.workloads if w.kind == "DaemonSet" and "device-plugin" in w.name and "nvidia" in w.name
    ]
    if not plugins:
        return results.failed(name, PHASE, "no device-plugin DaemonSet: nothing advertises nvidia.com/gpu")
    ready = max(w.ready for w in plugins)
    evidence = {f"{w.namespace}/{w.name}": {"desired": w.desired, "ready": w.ready} for w in plugins}
    message = f"device plugin ready on {ready} nodes for {len(gpu_nodes)} GPU nodes (snapshot counters)"
    if ready < len(gpu_nodes):
        return results.failed(name, PHASE, message, daemonSets=evidence)
    return results.passed(name, PHASE, message, daemonSets=evidence)


def taints_tolerated(
    daemon_sets: Sequence[Mapping[str, Any]], gpu_nodes: Sequence[Mapping[str, Any]]
) -> results.CheckResult:
    name = _TAINTS
    if not gpu_nodes:
        return results.skipped(name, PHASE, "no GPU nodes in the cluster")
    problems = []
    for ds in daemon_sets:
        template = _template(ds)
        selector = template.get("nodeSelector") or {}
        for node in gpu_nodes:
            if not _is_device_plugin(ds) and not health_asserts.labels_match(selector, _meta(node, "labels") or {}):
                continue
            untolerated = [
                f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute")
                and not health_asserts.node_accepts(
                    {"spec": {"taints": [t]}}, {"tolerations": template.get("tolerations")}
                )
            ]
            if untolerated:
                problems.append(
                    f"DaemonSet {_meta(ds, 'namespace')}/{_meta(ds, 'name')} does not tolerate "
                    f"{', '.join(untolerated)} on {_meta(node, 'name')}"
                )
    if problems:
        return results.failed(name, PHASE, "; ".join(problems))
    taints = sorted(
        {f"{t.get('key')}:{t.get('effect')}" for n in gpu_nodes for t in (n.get("spec") or {}).get("taints") or []}
    )
    return results.passed(
        name, PHASE, f"GPU DaemonSets tolerate the GPU node taints ({', '.join(taints) or 'none'})", taints=taints
    )


def no_cluster_admin(live: reading.LiveObjects) -> results.CheckResult:
    """No binding gives a dsx service account cluster-admin or a ClusterRole with `*` on `*`."""
    name = "conformance/dsx-not-cluster-admin"
    try:
        roles = {str(_meta(r, "name")): r for r in live.objects(_RBAC, "ClusterRole")}
        bindings = live.objects(_RBAC, "ClusterRoleBinding") + live.objects(_RBAC, "RoleBinding")
    except reading.DENIED as exc:
        return results.skipped(name, PHASE, f"cannot read RBAC bindings: {exc}")
    problems = []
    accounts = set()
    for binding in bindings:
        ref = binding.get("roleRef") or {}
        role_name = str(ref.get("name"))
        admin = ref.get("kind") == "ClusterRole" and (role_name == "cluster-admin" or _wildcard(roles.get(role_name)))
        for subject in binding.get("subjects") or []:
            if subject.get("kind") != "ServiceAccount":
                continue
            account = f"{subject.get('namespace') or _meta(binding, 'namespace')}/{subject.get('name')}"
            if not (str(subject.get("name", "")).startswith(DSX_PREFIX) or account.startswith(DSX_PREFIX)):
                continue
            accounts.add(account)
            if admin:
                problems.append(
                    f"{binding.get('kind')} {_meta(binding, 'name')} gives {account} ClusterRole {role_name}"
                )
    if problems:
        return results.failed(name, PHASE, "; ".join(sorted(problems)))
    return results.passed(
        name, PHASE, f"{len(accounts)} dsx service account(s), none cluster-admin", serviceAccounts=sorted(accounts)
    )


def _wildcard(role: Mapping[str, Any] | None) -> bool:
    for rule in (role or {}).get("rules") or []:
        if (
            "*" in (rule.get("verbs") or [])
            and "*" in (rule.get("resources") or [])
            and "*" in (rule.get("apiGroups") or [])
        ):
            return True
    return False


def _template(ds: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = (((ds.get("spec") or {}).get("template") or {}).get("spec")) or {}
    return spec


def _meta(obj: Mapping[str, Any], key: str) -> Any:
    return (obj.get("metadata") or {}).get(key)
