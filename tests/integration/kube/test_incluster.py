"""Area of concern: the in-cluster configuration against a real apiserver — a KubeClient built from
a service-account folder (token, ca.crt, namespace) and KUBERNETES_SERVICE_HOST/PORT acts as that
account, and picks up a rotated token from its file without being rebuilt."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dsx import errors, settings
from dsx.kube import incluster
from dsx.kube.client import KubeClient

pytestmark = pytest.mark.integration


def test_a_pod_client_acts_as_its_account_and_rereads_a_rotated_token(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    kube_client.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "pod", "namespace": sim_namespace}}
    )
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("a-token-the-apiserver-no-longer-accepts")
    shutil.copy(sim_cluster.state_dir / "pki" / "ca.crt", folder / "ca.crt")
    (folder / "namespace").write_text(sim_namespace)
    server = urlsplit(kube_client.server)
    pod_environment = {  # what the kubelet sets in a pod, as an entry point passes it down
        settings.SERVICE_ACCOUNT_DIR_ENV: str(folder),
        "HOME": str(tmp_path),
        incluster.HOST_ENV: str(server.hostname),
        incluster.PORT_ENV: str(server.port),
    }
    found = incluster.locate(None, pod_environment)
    assert isinstance(found, incluster.InCluster) and found.namespace == sim_namespace
    with KubeClient(found) as pod:
        with pytest.raises(errors.UnauthorizedError):
            pod.list_pods(sim_namespace)
        # the kubelet rotates the token: the same client reads the new one on the next 401
        (folder / "token").write_text(kube_client.service_account_token(sim_namespace, "pod", expiration_seconds=600))
        with pytest.raises(errors.ForbiddenError, match=f"system:serviceaccount:{sim_namespace}:pod"):
            pod.list_pods(sim_namespace)  # authenticated as the account, which may not list pods
        assert pod.server_version()["major"] == "1"
