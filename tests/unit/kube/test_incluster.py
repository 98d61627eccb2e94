"""Area of concern: which cluster a command talks to when none is named — kubeconfig files first
(--kubeconfig, $KUBECONFIG, ~/.kube/config, as kubectl), then the pod's service account from
KUBERNETES_SERVICE_HOST/PORT and the mounted folder, which DSX_SERVICE_ACCOUNT_DIR moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx import errors, settings
from dsx.kube import incluster
from dsx.kube.client import KubeClient

POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def account(tmp_path: Path) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("token-one\n")
    (folder / "ca.crt").write_text("not a real certificate\n")
    (folder / "namespace").write_text("dsx-system")
    return folder


def pod(account: Path, **more: str) -> dict[str, str]:
    """A pod's environment whose service-account folder is `account`."""
    return {**POD, settings.SERVICE_ACCOUNT_DIR_ENV: str(account), **more}


def test_the_folder_is_the_kubelet_mount_unless_the_setting_moves_it() -> None:
    assert settings.service_account_root({}) == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert settings.service_account_root({settings.SERVICE_ACCOUNT_DIR_ENV: "/elsewhere"}) == "/elsewhere"


def test_outside_a_pod_there_is_no_in_cluster_configuration(account: Path) -> None:
    assert incluster.detect({}) is None
    assert incluster.detect({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}) is None


def test_inside_a_pod_the_server_comes_from_the_environment_and_the_rest_from_the_folder(account: Path) -> None:
    found = incluster.detect(pod(account))
    assert found == incluster.InCluster("https://10.96.0.1:443", account)
    assert found.namespace == "dsx-system"
    config = found.kubeconfig()
    (user,) = config["users"]  # type: ignore[misc]
    assert user["user"] == {"tokenFile": str(account / "token")}  # read from the file, so rotation is seen
    ipv6 = pod(account, KUBERNETES_SERVICE_HOST="fd00::1", KUBERNETES_SERVICE_PORT="6443")
    assert incluster.detect(ipv6).server == (  # type: ignore[union-attr]
        "https://[fd00::1]:6443"
    )


def test_a_pod_without_its_token_is_an_error_naming_the_folder(account: Path) -> None:
    (account / "token").unlink()
    with pytest.raises(errors.NotFoundError, match=f"{account} has no token"):
        incluster.detect(pod(account))


def test_kubeconfig_files_come_first_then_the_pod(account: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    listed = tmp_path / "listed.yaml"
    env = pod(account, HOME=str(home), KUBECONFIG=f"{tmp_path / 'missing.yaml'}:{listed}")
    assert incluster.locate("explicit.yaml", env) == Path("explicit.yaml")
    assert isinstance(incluster.locate(None, env), incluster.InCluster)  # no file exists yet
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text("{}")
    assert incluster.locate(None, env) == home / ".kube" / "config"
    listed.write_text("{}")
    assert incluster.locate(None, env) == listed
    outside = {"HOME": str(tmp_path / "nobody"), "KUBECONFIG": str(tmp_path / "missing.yaml")}
    assert incluster.locate(None, outside) is None


def test_the_client_builds_from_the_service_account(account: Path, tmp_path: Path) -> None:
    with pytest.raises(errors.BadInputError, match="TLS configuration"):  # the CA is no certificate
        KubeClient(incluster.InCluster("https://127.0.0.1:1", account))


def test_commands_say_where_they_looked(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing.yaml")}
    with pytest.raises(errors.NotFoundError) as raised:
        incluster.require(None, "dsx snapshot", environ)
    assert str(raised.value) == (
        f"dsx snapshot: no cluster: kubeconfig not found ({tmp_path / 'missing.yaml'}, {tmp_path / '.kube/config'}) "
        "and not in a pod (KUBERNETES_SERVICE_HOST unset): give --kubeconfig FILE or set KUBECONFIG"
    )
