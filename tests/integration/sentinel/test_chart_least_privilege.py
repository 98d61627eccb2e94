"""Area of concern: the sentinel's chart grants least privilege, checked on helm's own rendering
(issue 29, deliverable 4): the node monitor and every image run as non-root under a seccomp
profile, reading the journal through group membership, writing one host folder and tolerating
only the taints it needs; pod deletion is bound only in the drain's DeleteAfterTimeout namespaces,
never cluster-wide or in a system namespace; the certification namespace enforces Pod Security
baseline, or with certification.allowIpcLock baseline plus IPC_LOCK through a
ValidatingAdmissionPolicy (the apiserver refuses privileged, host-namespace, hostPath and
host-port pods there either way, and admits the sentinel's own certification pods); only the
monitors and Prometheus reach the sentinel;
the Lease is held by name; the images come FROM a digest over a dated Debian snapshot. Each test
fails on the chart before these changes."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.certify import platforms
from dsx.certify.executor import WorkloadRun
from dsx.errors import DsxError
from dsx.executors import kubernetes
from dsx.kube.client import KubeClient
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog
from dsx.testing.fake_executor import FakeJobLauncher

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "deploy" / "helm" / "dsx-sentinel"
SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease"}
IB_NODES = [
    model.CandidateNode(f"gpu-ib-{i}", allocatable_gpus=8, network_devices={"nvidia.com/mlnxnics": 8}) for i in range(2)
]


def render(helm_binary: Path, *flags: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(helm_binary), "template", "dsx-sentinel", str(CHART), "--namespace", "dsx-system", *flags]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 or not check, done.stderr
    return done


def objects(helm_binary: Path, *flags: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(kind, namespace, name) → object of the chart's rendering with `flags`."""
    docs = serialization.parse_yaml_documents(render(helm_binary, *flags).stdout, source="helm template")
    return {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs if isinstance(d, dict)
    }


@pytest.fixture(scope="module")
def default(helm_binary: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    return objects(helm_binary)


def monitor_pod(rendered: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    return rendered[("DaemonSet", "dsx-system", "dsx-sentinel-monitor")]["spec"]["template"]["spec"]


def test_the_monitor_runs_as_non_root_under_a_seccomp_profile_reading_the_journal_by_group(default) -> None:
    pod = monitor_pod(default)
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] != 0 and context["runAsGroup"] != 0
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert 4 in context["supplementalGroups"]  # adm: the journal's ACL group
    for container in pod["containers"]:
        own = container["securityContext"]
        assert own.get("runAsUser", context["runAsUser"]) != 0 and not own.get("privileged")
        assert own["allowPrivilegeEscalation"] is False and own["capabilities"] == {"drop": ["ALL"]}


def test_the_monitor_writes_one_host_folder_and_only_chown_runs_as_root(default) -> None:
    pod = monitor_pod(default)
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    writable = {
        m["name"]
        for c in [*pod.get("initContainers", []), *pod["containers"]]
        for m in c["volumeMounts"]
        if m["name"] in host_paths and not m.get("readOnly")
    }
    assert {host_paths[n] for n in writable} == {"/var/lib/dsx-sentinel-monitor"}
    root = [c for c in pod.get("initContainers", []) if c["securityContext"].get("runAsUser") == 0]
    assert [c["command"][0] for c in root] == ["chown"]
    (owner,) = root
    assert owner["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert [m["name"] for m in owner["volumeMounts"]] == list(writable)
    user = pod["securityContext"]["runAsUser"]
    assert owner["command"][1] == f"{user}:{user}"


def test_the_monitor_tolerates_the_gpu_and_quarantine_taints_not_every_taint(default, helm_binary: Path) -> None:
    tolerations = monitor_pod(default)["tolerations"]
    assert all(t.get("key") for t in tolerations), "a toleration without a key tolerates every taint"
    assert {t["key"] for t in tolerations} == {
        "nvidia.com/gpu",
        "sentinel.dsx.run/quarantined",
        "sentinel.dsx.run/not-yet-certified",  # a joining node's, until it is certified
    }
    taint = {"key": "example.com/repair", "value": "x", "effect": "NoExecute"}
    rule = {"name": "r", "match": {"all": ["event.isFatal"]}, "cordon": True, "taints": [taint]}
    changed = objects(helm_binary, "--set-json", _policy_json(rule))
    assert "example.com/repair" in {t["key"] for t in monitor_pod(changed)["tolerations"]}


def test_each_monitor_speaks_for_its_node_with_its_own_token_not_the_shared_one(default, helm_binary: Path) -> None:
    """monitor.auth serviceAccountToken (default): a projected token bound to the pod, checked by
    TokenReview; the shared tokens Secret stays in the sentinel's pods only."""
    volumes = {v["name"]: v for v in monitor_pod(default)["volumes"]}
    assert "secret" not in volumes["tokens"]
    (source,) = volumes["tokens"]["projected"]["sources"]
    assert source["serviceAccountToken"] == {"audience": "dsx-sentinel", "expirationSeconds": 3600, "path": "token"}
    args = monitor_pod(default)["containers"][0]["args"]
    assert "--token-file=/etc/dsx/tokens/token" in args
    sentinel_args = default[("Deployment", "dsx-system", "dsx-sentinel")]["spec"]["template"]["spec"]["containers"][0]
    assert "--token-review-audience=dsx-sentinel" in sentinel_args["args"]
    assert "--token-review-service-account=$(POD_NAMESPACE)/dsx-sentinel-monitor" in sentinel_args["args"]
    rules, _ = _rbac(default)
    assert {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]} in rules

    shared = objects(helm_binary, "--set", "monitor.auth=sharedToken")
    volumes = {v["name"]: v for v in monitor_pod(shared)["volumes"]}
    assert volumes["tokens"] == {"name": "tokens", "secret": {"secretName": "dsx-sentinel-tokens"}}
    assert not [r for r in _rbac(shared)[0] if "tokenreviews" in r["resources"]]
    refused = render(helm_binary, "--set", "monitor.auth=anything", check=False)
    assert refused.returncode != 0 and "allowed: serviceAccountToken, sharedToken" in refused.stderr


def _policy_json(rule: dict[str, Any]) -> str:
    return "policy=" + json.dumps({"quarantine": {"ruleSets": [rule]}})


def _rbac(rendered: dict[tuple[str, str, str], dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    cluster_rules = [r for (k, _, _), d in rendered.items() if k == "ClusterRole" for r in d["rules"]]
    bindings = [d for (k, _, _), d in rendered.items() if k in ("RoleBinding", "ClusterRoleBinding")]
    return cluster_rules, bindings


def _pod_deleting_namespaces(rendered: dict[tuple[str, str, str], dict[str, Any]]) -> set[str]:
    """Where the sentinel may delete pods: namespaces of RoleBindings to a role that deletes pods."""
    deleting = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
        for d in rendered.values()
        if d["kind"] in ("ClusterRole", "Role")
        and any("pods" in r["resources"] and "delete" in r["verbs"] for r in d["rules"])
    }
    found: set[str] = set()
    for binding in _rbac(rendered)[1]:
        ref = binding["roleRef"]
        role_namespace = "" if ref["kind"] == "ClusterRole" else binding["metadata"]["namespace"]
        if (ref["kind"], role_namespace, ref["name"]) in deleting:
            found.add(binding["metadata"].get("namespace", "*") if binding["kind"] == "RoleBinding" else "*")
    return found


def test_pods_are_deleted_only_in_the_delete_after_timeout_namespaces(default, helm_binary: Path) -> None:
    # the default policy's DeleteAfterTimeout names a pattern ("inference-*") only; a certification
    # run's cleanup deletes its own pods in the certification namespace
    assert _pod_deleting_namespaces(default) == {"dsx-runs"}
    listed = objects(helm_binary, "--set", "rbac.podDeleteNamespaces={inference-a,kube-system}")
    assert _pod_deleting_namespaces(listed) == {"inference-a", "dsx-runs"}  # never a system namespace
    drain = {
        "namespaces": [
            {"match": "serving", "mode": "DeleteAfterTimeout", "timeoutSeconds": 60},
            {"match": "batch-*", "mode": "DeleteAfterTimeout", "timeoutSeconds": 60},
            {"match": "jobs", "mode": "AllowCompletion"},
        ]
    }
    named = objects(helm_binary, "--set-json", "policy=" + json.dumps({"drain": drain}))
    assert _pod_deleting_namespaces(named) == {"serving", "dsx-runs"}
    everywhere = {"drain": {"defaultMode": "DeleteAfterTimeout"}}
    refused = render(helm_binary, "--set-json", "policy=" + json.dumps(everywhere), check=False)
    assert refused.returncode != 0 and "pod deletion in every namespace" in refused.stderr


def test_no_namespace_may_be_changed_and_the_lease_is_held_by_name(default) -> None:
    cluster_rules, _ = _rbac(default)
    assert not [r for r in cluster_rules if "namespaces" in r["resources"]]
    role = default[("Role", "dsx-system", "dsx-sentinel-leader-election")]
    for rule in role["rules"]:
        named = set(rule["verbs"]) - {"create"}
        assert not named or rule.get("resourceNames") == ["dsx-sentinel"], rule
        assert "create" not in rule["verbs"] or set(rule["verbs"]) == {"create"}  # create names no object


def test_the_runs_namespace_enforces_pod_security(default, helm_binary: Path) -> None:
    labels = default[("Namespace", "", "dsx-runs")]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] in ("baseline", "restricted")
    restricted = objects(helm_binary, "--set", "certification.podSecurity=restricted")
    assert restricted[("Namespace", "", "dsx-runs")]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == (
        "restricted"
    )
    assert not [k for k in default if k[0].startswith("ValidatingAdmissionPolicy")]
    rdma = objects(helm_binary, "--set", "certification.allowIpcLock=true")
    assert (
        rdma[("Namespace", "", "dsx-runs")]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    )
    binding = rdma[("ValidatingAdmissionPolicyBinding", "", "dsx-sentinel-runs")]["spec"]
    assert binding["validationActions"] == ["Deny"] and binding["policyName"] == "dsx-sentinel-runs"
    assert binding["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "dsx-runs"}
    }
    assert rdma[("ValidatingAdmissionPolicy", "", "dsx-sentinel-runs")]["spec"]["failurePolicy"] == "Fail"
    refused = render(helm_binary, "--set", "certification.podSecurity=privileged", check=False)
    assert refused.returncode != 0 and "allowed values baseline, restricted" in refused.stderr


def test_only_the_monitors_and_prometheus_reach_the_sentinel(default) -> None:
    policy = default[("NetworkPolicy", "dsx-system", "dsx-sentinel")]["spec"]
    deployment = default[("Deployment", "dsx-system", "dsx-sentinel")]
    assert policy["podSelector"]["matchLabels"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    peers = rule["from"]
    assert peers and all(p for p in peers), "an empty peer admits everyone"
    monitor_labels = default[("DaemonSet", "dsx-system", "dsx-sentinel-monitor")]["spec"]["template"]["metadata"]
    pods = [p["podSelector"]["matchLabels"] for p in peers if "podSelector" in p]
    assert pods and all(m.items() <= monitor_labels["labels"].items() for m in pods)
    assert [p["namespaceSelector"] for p in peers if "namespaceSelector" in p] == [
        {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    ]


def test_every_pod_of_the_chart_runs_as_non_root_under_a_seccomp_profile(default) -> None:
    for (kind, _, name), doc in default.items():
        if kind not in ("Deployment", "DaemonSet"):
            continue
        context = doc["spec"]["template"]["spec"]["securityContext"]
        assert context["runAsNonRoot"] is True and context["seccompProfile"] == {"type": "RuntimeDefault"}, name


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


@pytest.mark.parametrize("image", ["dsx", "dsx-workload"])
def test_the_images_end_as_a_non_root_user(image: str) -> None:
    users = [
        rest
        for instruction, rest in _instructions(REPO / "deploy" / "images" / image / "Containerfile")
        if instruction == "USER"
    ]
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_the_images_come_from_a_digest_over_a_dated_debian_snapshot() -> None:
    """`make image` passes each FROM a digest (the base it built or was given, the dsx image it
    built), and the base's packages come from snapshot.debian.org at a fixed date."""
    dry = ["make", "-n", "image-dsx", "image-workload", "-o", "image-base", "-o", "dist", "IMAGE_TOOL=buildah"]
    make = subprocess.run(dry, cwd=REPO, capture_output=True, text=True, timeout=60).stdout  # -n: nothing runs
    builds = [line for line in make.splitlines() if " build " in f" {line} " and "--build-arg" in line]
    assert len(builds) == 2
    assert 'BASE_IMAGE="$base"' in builds[0] and "*@sha256:*" in make
    assert re.search(r'DSX_IMAGE="ghcr\.io/dsx-run/dsx:[\w.]+@\$\(', builds[1])
    rootfs = subprocess.run(
        ["make", "-n", "-B", "build/image/rootfs.tar"], cwd=REPO, capture_output=True, text=True, timeout=60
    ).stdout  # a file target without $(MAKE): -n prints it only
    mirrors = re.findall(r'"deb (\S+) bookworm', rootfs)
    assert mirrors and all(
        re.fullmatch(r"http://snapshot\.debian\.org/archive/debian(-security)?/\d{8}T\d{6}Z", m) for m in mirrors
    )
    for image in ("dsx", "dsx-workload"):
        (source,) = [r for i, r in _instructions(REPO / "deploy" / "images" / image / "Containerfile") if i == "FROM"]
        assert re.fullmatch(r"\$\{\w+\}", source), f"{image}: FROM takes the digest make passes"


@dataclass(frozen=True)
class RunsNamespace:
    name: str
    refusal: str  # what the apiserver's refusal says: Pod Security Admission's, or the chart's policy's
    ipc_lock: bool


@pytest.fixture(params=["baseline", "allowIpcLock"])
def runs_namespace(
    request: pytest.FixtureRequest, helm_binary: Path, kube_client: KubeClient
) -> Iterator[RunsNamespace]:
    """The chart's certification namespace as rendered (Pod Security labels, and with
    certification.allowIpcLock its ValidatingAdmissionPolicy and binding), on the sim."""
    suffix = uuid.uuid4().hex[:6]
    name = f"dsx-runs-psa-{suffix}"
    flags = ["--set", f"certification.namespace={name}", "--set", f"fullnameOverride=psa-{suffix}"]
    ipc_lock = request.param == "allowIpcLock"
    if ipc_lock:
        flags += ["--set", "certification.allowIpcLock=true"]
    kinds = ("Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    docs = [d for (k, _, _), d in objects(helm_binary, *flags).items() if k in kinds]
    assert len(docs) == (3 if ipc_lock else 1)
    for doc in docs:
        kube_client.apply(doc)
    try:
        found = RunsNamespace(name, "certification namespace" if ipc_lock else "PodSecurity", ipc_lock)
        if ipc_lock:  # a new policy is enforced once the apiserver compiled it
            privileged = _pod(name, "probe", {"containers": [_container(securityContext={"privileged": True})]})
            deadline = time.monotonic() + 30
            while found.refusal not in _refusal(kube_client, privileged):
                assert time.monotonic() < deadline, "the ValidatingAdmissionPolicy is not in force after 30 s"
                time.sleep(0.25)
        yield found
    finally:
        for doc in reversed(docs):
            kube_client.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


def _refusal(kube_client: KubeClient, pod: dict[str, Any]) -> str:
    """The apiserver's refusal of a dry-run `pod`, or "" when it admits it."""
    try:
        kube_client.apply(pod, dry_run=True)
    except DsxError as exc:
        return str(exc)
    return ""


def _pod(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _container(**extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "registry.k8s.io/pause:3.10", **extra}


def test_the_apiserver_refuses_a_way_onto_the_node_in_the_runs_namespace(
    runs_namespace: RunsNamespace, kube_client: KubeClient
) -> None:
    hostile = {
        "privileged": {"containers": [_container(securityContext={"privileged": True})]},
        "hostpath": {"containers": [_container()], "volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        "hostnetwork": {"hostNetwork": True, "containers": [_container()]},
        "hostpid": {"hostPID": True, "containers": [_container()]},
        "sys-admin": {"containers": [_container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})]},
        "hostport": {"containers": [_container(ports=[{"containerPort": 80, "hostPort": 80}])]},
        "unconfined": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [_container()]},
        "init-privileged": {
            "initContainers": [_container(name="i", securityContext={"privileged": True})],
            "containers": [_container()],
        },
    }
    for what, spec in hostile.items():
        said = _refusal(kube_client, _pod(runs_namespace.name, f"hostile-{what}", spec))
        assert runs_namespace.refusal in said, f"{what}: {said or 'admitted'}"
    ipc_lock = {"containers": [_container(securityContext={"capabilities": {"add": ["IPC_LOCK"]}})]}
    said = _refusal(kube_client, _pod(runs_namespace.name, "ipc-lock", ipc_lock))
    assert (said == "") is runs_namespace.ipc_lock, said


def _certification_pods(nodes: list[model.CandidateNode], category: str, scale: model.Scale | None) -> list[dict]:
    """Every pod template the sentinel's certification of `category` on `nodes` renders: the plain
    Jobs and the TrainJob runtime copies."""
    chosen = catalog.get(category)
    fabric = platforms.fabric(nodes, accelerator="h100", scale=scale or chosen.scale)
    names = tuple(n.name for n in nodes)
    run = WorkloadRun(
        f"{category}/psa",
        chosen,
        names,
        8,
        model.Timeouts(60, 60),
        program=chosen.program,
        fabric=fabric,
        accelerator="h100",
    )
    by_name = {n.name: n for n in nodes}
    jobs = [o for o in kubernetes.render_jobs(run, "r1", nodes=by_name, certification_id="psa") if o["kind"] == "Job"]
    executor = kubernetes.KubernetesExecutor(FakeJobLauncher(), nodes, certification_id="psa")  # renders only
    return [j["spec"]["template"]["spec"] for j in jobs] + [
        r["template"]["spec"]["template"]["spec"]
        for runtime in executor.runtimes_for([run])
        for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
    ]


def test_the_sentinels_certification_pods_are_admitted_there(
    runs_namespace: RunsNamespace, kube_client: KubeClient
) -> None:
    """On InfiniBand nodes the one-node categories the sentinel re-certifies with add nothing, so
    baseline admits them; the multi-node group validation adds IPC_LOCK, admitted with
    certification.allowIpcLock and refused without it."""
    one_node = [
        *_certification_pods([IB_NODES[0]], "nccl-loopback", None),
        *_certification_pods([IB_NODES[0]], "training", model.Scale.INTRA_NODE),
    ]
    group = _certification_pods(IB_NODES, "nccl-all-reduce", None)
    assert one_node and group
    for index, spec in enumerate(one_node):
        assert _refusal(kube_client, _pod(runs_namespace.name, f"one-node-{index}", spec)) == ""
    for index, spec in enumerate(group):
        said = _refusal(kube_client, _pod(runs_namespace.name, f"group-{index}", spec))
        assert (said == "") is runs_namespace.ipc_lock, said
