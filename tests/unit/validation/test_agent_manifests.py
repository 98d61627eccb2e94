"""Area of concern: the snapshot agent manifests are valid Kubernetes objects, grant no wildcard,
Secret-reading or cluster-admin right beyond what the README states, and call dsx flags that exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest

from dsx import serialization
from dsx.cli import snapshot_cmd

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "snapshot-agent"
KUBERNETES_VERSION = "1.34.0"


def documents() -> list[dict[str, Any]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        out += serialization.parse_yaml_documents(path.read_text(), source=str(path))
    return out


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in documents() if d["kind"] == kind]


@pytest.mark.parametrize("doc", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_object_is_schema_valid(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_no_wildcards_and_no_cluster_admin() -> None:
    for role in by_kind("Role") + by_kind("ClusterRole"):
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], role["metadata"]["name"]
            assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"])
    for binding in by_kind("RoleBinding") + by_kind("ClusterRoleBinding"):
        assert binding["roleRef"]["name"] != "cluster-admin"


def test_node_agent_can_only_write_configmaps_in_its_namespace() -> None:
    bound = [
        b
        for b in by_kind("RoleBinding") + by_kind("ClusterRoleBinding")
        if b["subjects"][0]["name"] == "dsx-snapshot-node"
    ]
    assert [b["kind"] for b in bound] == ["RoleBinding"]
    role = next(r for r in by_kind("Role") if r["metadata"]["name"] == bound[0]["roleRef"]["name"])
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]}]


def test_secrets_are_listed_only_by_the_cluster_reader() -> None:
    grants = [
        (role["metadata"]["name"], rule["verbs"])
        for role in by_kind("Role") + by_kind("ClusterRole")
        for rule in role["rules"]
        if "secrets" in rule["resources"]
    ]
    assert grants == [("dsx-snapshot-reader", ["list"])]


def test_host_is_mounted_read_only() -> None:
    for workload in by_kind("DaemonSet") + by_kind("Job"):
        spec = workload["spec"]["template"]["spec"]
        host_volumes = {v["name"] for v in spec["volumes"] if "hostPath" in v}
        for container in spec["containers"]:
            for mount in container["volumeMounts"]:
                if mount["name"] in host_volumes:
                    assert mount.get("readOnly") is True
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert not spec.get("hostPID") and not spec.get("hostIPC")


def _command(args: list[str]) -> click.Command:
    command: click.Command = snapshot_cmd.snapshot
    if args and args[0] == "node":
        command = snapshot_cmd.node
    return command


@pytest.mark.parametrize(
    "workload", by_kind("DaemonSet") + by_kind("Job"), ids=lambda w: f"{w['kind']}/{w['metadata']['name']}"
)
def test_container_args_are_real_dsx_flags(workload: dict[str, Any]) -> None:
    container = workload["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "snapshot"
    rest = args[1:]
    command = _command(rest)
    flags = {opt for p in command.params for opt in getattr(p, "opts", [])}
    for arg in rest:
        if arg.startswith("--"):
            assert arg.split("=", 1)[0] in flags, arg
    output = next(a for a in rest if a.startswith("--output="))
    assert output.split("=", 1)[1].startswith("cm://dsx-system/")
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    assert "/etc/dsx" in mounts
