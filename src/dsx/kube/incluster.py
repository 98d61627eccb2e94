"""Which cluster a command talks to when none is named: kubeconfig files first, then the pod's own
service account, in the order kubectl and client-go use.

Inside a pod the kubelet mounts `token`, `ca.crt` and `namespace` under
/var/run/secrets/kubernetes.io/serviceaccount (`dsx.settings.service_account_root`, overridable with
DSX_SERVICE_ACCOUNT_DIR) and sets KUBERNETES_SERVICE_HOST/PORT. The token is never copied: the
client reads it from its file, and again whenever the apiserver answers 401, so a token the
kubelet rotated is picked up without a restart. Every function here reads the environment its
caller passes (an entry point's `os.environ`, a test's dict), never the process's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dsx import errors, settings

HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"


@dataclass(frozen=True)
class InCluster:
    """The pod's service account: the apiserver from the environment, credentials from a folder."""

    server: str
    account_dir: Path

    @property
    def token_file(self) -> Path:
        return self.account_dir / "token"

    @property
    def ca_file(self) -> Path:
        return self.account_dir / "ca.crt"

    @property
    def namespace(self) -> str:
        """The pod's namespace ("default" when the folder has no namespace file)."""
        path = self.account_dir / "namespace"
        return path.read_text(encoding="utf-8").strip() if path.is_file() else "default"

    def kubeconfig(self) -> dict[str, object]:
        """The equivalent kubeconfig document: tokenFile (re-read on rotation), never the token itself."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "in-cluster", "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "service-account", "user": {"tokenFile": str(self.token_file)}}],
            "contexts": [
                {
                    "name": "in-cluster",
                    "context": {"cluster": "in-cluster", "user": "service-account", "namespace": self.namespace},
                }
            ],
            "current-context": "in-cluster",
        }

    def __str__(self) -> str:
        return f"in-cluster service account ({self.account_dir})"


def detect(environ: Mapping[str, str], account_dir: Path | None = None) -> InCluster | None:
    """The pod's service account, or None outside a pod (no KUBERNETES_SERVICE_HOST/PORT).

    Inside a pod whose token or CA is missing this is an error, not None: the pod asked for the
    API (the environment says so) and would otherwise fall through to a confusing "no cluster".
    """
    host, port = environ.get(HOST_ENV, ""), environ.get(PORT_ENV, "")
    if not host or not port:
        return None
    folder = account_dir or Path(settings.service_account_root(environ))
    missing = [p.name for p in (folder / "token", folder / "ca.crt") if not p.is_file()]
    if missing:
        raise errors.NotFoundError(
            f"in-cluster configuration: {HOST_ENV} is set but {folder} has no {' or '.join(missing)} "
            f"(mount the service-account token, or set {settings.SERVICE_ACCOUNT_DIR_ENV} or --kubeconfig)"
        )
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return InCluster(f"https://{host}:{port}", folder)


def locate(explicit: str | Path | None, environ: Mapping[str, str]) -> Path | InCluster | None:
    """The cluster a command means, as kubectl finds it, or None when nothing names one.

    --kubeconfig, else the first existing file of $KUBECONFIG, else ~/.kube/config when it
    exists, else the pod's service account.
    """
    if explicit:
        return Path(explicit)
    for candidate in _kubeconfig_files(environ):
        if candidate.is_file():
            return candidate
    return detect(environ)


def require(
    explicit: str | Path | None, what: str, environ: Mapping[str, str], *, alternative: str = ""
) -> Path | InCluster:
    """`locate`, or NotFoundError naming every place looked at (`what`: the command; `alternative`: its other way)."""
    found = locate(explicit, environ)
    if found is None:
        looked = ", ".join(str(p) for p in _kubeconfig_files(environ))
        raise errors.NotFoundError(
            f"{what}: no cluster: kubeconfig not found ({looked}) and not in a pod ({HOST_ENV} unset): "
            f"give --kubeconfig FILE{alternative} or set KUBECONFIG"
        )
    return found


def _kubeconfig_files(env: Mapping[str, str]) -> list[Path]:
    listed = [Path(p) for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    return [*listed, Path(settings.home(env)) / ".kube" / "config"]
