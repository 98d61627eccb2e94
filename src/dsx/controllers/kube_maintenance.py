"""`dsx.health.decisions.ports.MaintenanceRequests` over `dsx.kube.client.KubeClient`.

Finalizers are a merge patch carrying the resourceVersion read, so a request changed in between
answers 409 (ConflictError) instead of losing a finalizer another controller added; status
goes through the status subresource, as the CRD declares it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsx.health.decisions.maintenance import API_VERSION, KIND, PLURAL
from dsx.kube.client import KubeClient


class KubeMaintenanceRequests:
    """MaintenanceRequests against one cluster."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        client.declare_kind(API_VERSION, KIND, PLURAL)

    def list_requests(self) -> list[dict[str, Any]]:
        return self.client.list(API_VERSION, KIND)

    def set_finalizers(self, name: str, finalizers: Sequence[str], *, resource_version: str) -> dict[str, Any]:
        patch = {"metadata": {"finalizers": list(finalizers), "resourceVersion": resource_version}}
        return self.client.patch(API_VERSION, KIND, name, patch)

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        self.client.patch(API_VERSION, KIND, name, {"status": dict(status)}, status=True)


if TYPE_CHECKING:  # held to the port by mypy
    from dsx.health.decisions.ports import MaintenanceRequests

    def _implements(requests: KubeMaintenanceRequests) -> MaintenanceRequests:
        return requests
