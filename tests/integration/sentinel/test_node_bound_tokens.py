"""Area of concern: events bound to their node (issue 31). A monitor authenticates with its pod's
projected service-account token; the sentinel asks the real apiserver (TokenReview) who that is
and takes events from it for the pod's node only. An event for another node is refused (403), a
token of another service account or one not bound to a pod is refused (401), and the shared
token keeps working."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dsx.kube.client import KubeClient
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, RecommendedAction

from .harness import TOKEN, SentinelProcess, policy_file

pytestmark = pytest.mark.integration

AUDIENCE = "dsx-sentinel"


def xid_for(node: str) -> dict[str, Any]:
    return HealthEvent(
        agent="kernel-log-monitor",
        component_class=ComponentClass.GPU,
        check_name="KernelLogXid",
        node_name=node,
        generated_at=datetime.now(UTC),
        is_fatal=True,
        is_healthy=False,
        message=f"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus ({uuid.uuid4().hex[:6]})",
        recommended_action=RecommendedAction.RESTART_BM,
        error_codes=("79",),
        entities=(Entity(EntityType.GPU, "0"),),
    ).to_dict()


def post(url: str, token: str, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url + "/v1/events",
        data=json.dumps({"events": [event]}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def monitor_pod(kube: KubeClient, namespace: str, name: str, account: str, node: str) -> str:
    """A pod of `account` on `node` (kwok runs it); its uid."""
    created = kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "nodeName": node,
                "serviceAccountName": account,
                "containers": [{"name": "monitor", "image": "ghcr.io/dsx-run/dsx:0.1.0"}],
            },
        }
    )
    return str(created["metadata"]["uid"])


def test_a_monitor_token_posts_for_its_own_node_only(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    mine, other = sim_cluster.node_names[0], sim_cluster.node_names[1]
    account = f"monitor-{uuid.uuid4().hex[:6]}"
    for name in (account, f"{account}-other"):
        kube_client.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": sim_namespace}}
        )
    uid = monitor_pod(kube_client, sim_namespace, f"{account}-pod", account, mine)
    bound = kube_client.service_account_token(
        sim_namespace, account, audiences=(AUDIENCE,), bound_pod=(f"{account}-pod", uid)
    )
    stray_uid = monitor_pod(kube_client, sim_namespace, f"{account}-stray", f"{account}-other", mine)
    stranger = kube_client.service_account_token(
        sim_namespace, f"{account}-other", audiences=(AUDIENCE,), bound_pod=(f"{account}-stray", stray_uid)
    )
    unbound = kube_client.service_account_token(sim_namespace, account, audiences=(AUDIENCE,))
    wrong_audience = kube_client.service_account_token(
        sim_namespace, account, audiences=("https://kubernetes.default.svc",), bound_pod=(f"{account}-pod", uid)
    )

    sentinel = SentinelProcess(
        tmp_path,
        policy_file(tmp_path, {"monitors": {"startAtEnd": True}}),
        f"sqlite:///{tmp_path / 'events.db'}",
        "--sim",
        sim_cluster.name,
        "--token-review-audience",
        AUDIENCE,
        "--token-review-service-account",
        f"{sim_namespace}/{account}",
    )
    try:
        sentinel.start()
        status, answer = post(sentinel.url, bound, xid_for(mine))
        assert status == 202 and answer["created"] == 1, answer

        status, answer = post(sentinel.url, bound, xid_for(other))
        assert status == 403, answer
        refusal = answer["error"]
        assert refusal["code"] == "FORBIDDEN" and "may post events for that node only" in refusal["message"]
        assert f"node {mine!r}" in refusal["message"] and f"pod {account}-pod" in refusal["message"]

        for token in (stranger, unbound, wrong_audience):
            status, _ = post(sentinel.url, token, xid_for(mine))
            assert status == 401

        status, answer = post(sentinel.url, TOKEN, xid_for(other))  # the shared token speaks for any node
        assert status == 202 and answer["created"] == 1
    finally:
        sentinel.stop()
        for name in (f"{account}-pod", f"{account}-stray"):
            kube_client.delete("v1", "Pod", name, sim_namespace)
        for name in (account, f"{account}-other"):
            kube_client.delete("v1", "ServiceAccount", name, sim_namespace)
