"""Contract: `MaintenanceRequests` (dsx.health.decisions.ports): the fake and the Kubernetes adapter
answer the same cases.

`dsx.testing.inmemory_maintenance.InMemoryMaintenanceRequests` stands in for the apiserver in the
maintenance controller's unit tests; `dsx.controllers.kube_maintenance.KubeMaintenanceRequests`
is the real thing, here against a real kube-apiserver (dsx sim) serving the chart's own CRD.
What the controller relies on is checked on both: finalizers guarded by resourceVersion, a
delete that only marks an object holding a finalizer, the object gone with its last finalizer,
status written beside the spec, NotFoundError for an object that is gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsx import errors
from dsx.files import documents
from dsx.health.decisions.maintenance import API_VERSION, KIND
from dsx.health.decisions.ports import MaintenanceRequests
from dsx.testing.inmemory_maintenance import InMemoryMaintenanceRequests

CRD = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "dsx-sentinel" / "crds" / "maintenancerequests.yaml"
SPEC = {"nodeName": "contract-node", "startTime": "2026-12-10T02:00:00Z"}
FINALIZER = "contract.dsx.run/holds"


@dataclass
class Backend:
    requests: MaintenanceRequests
    create: Callable[[str], None]
    delete: Callable[[str], None]
    name: str

    def current(self) -> dict[str, Any] | None:
        return next((o for o in self.requests.list_requests() if o["metadata"]["name"] == self.name), None)


@pytest.fixture(params=["fake", pytest.param("kube", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    name = f"contract-{uuid.uuid4().hex[:8]}"
    if request.param == "fake":
        fake = InMemoryMaintenanceRequests()
        yield Backend(fake, lambda n: fake.create(n, SPEC) and None, lambda n: fake.delete(n) and None, name)
        return
    from dsx.controllers.kube_maintenance import KubeMaintenanceRequests

    client = request.getfixturevalue("kube_client")
    client.create_crd(documents.load_mapping_file(CRD))
    real = KubeMaintenanceRequests(client)

    def create(n: str) -> None:
        client.create({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": n}, "spec": SPEC})

    try:
        yield Backend(real, create, lambda n: client.delete(API_VERSION, KIND, n) and None, name)
    finally:
        try:
            client.patch(API_VERSION, KIND, name, {"metadata": {"finalizers": []}})
            client.delete(API_VERSION, KIND, name)
        except errors.NotFoundError:
            pass


def test_a_finalizer_write_is_guarded_by_the_resource_version(backend: Backend) -> None:
    backend.create(backend.name)
    first = backend.current()
    assert first is not None and not first["metadata"].get("finalizers")
    after = backend.requests.set_finalizers(
        backend.name, [FINALIZER], resource_version=first["metadata"]["resourceVersion"]
    )
    assert after["metadata"]["finalizers"] == [FINALIZER]
    assert after["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    with pytest.raises(errors.ConflictError):
        backend.requests.set_finalizers(backend.name, [], resource_version=first["metadata"]["resourceVersion"])
    assert backend.current()["metadata"]["finalizers"] == [FINALIZER]


def test_a_held_object_is_only_marked_on_delete_and_goes_with_its_last_finalizer(backend: Backend) -> None:
    backend.create(backend.name)
    found = backend.current()
    backend.requests.set_finalizers(backend.name, [FINALIZER], resource_version=found["metadata"]["resourceVersion"])
    backend.delete(backend.name)
    marked = backend.current()
    assert marked is not None and marked["metadata"].get("deletionTimestamp")
    backend.requests.set_finalizers(backend.name, [], resource_version=marked["metadata"]["resourceVersion"])
    assert backend.current() is None
    with pytest.raises(errors.NotFoundError):
        backend.requests.set_status(backend.name, {"phase": "Ready"})


def test_status_is_written_beside_the_spec(backend: Backend) -> None:
    backend.create(backend.name)
    backend.requests.set_status(backend.name, {"phase": "Pending", "message": "cordon and drain begin at …"})
    backend.requests.set_status(backend.name, {"phase": "Draining", "message": "1 pod(s) to leave"})
    now = backend.current()
    assert now["status"]["phase"] == "Draining" and now["status"]["message"] == "1 pod(s) to leave"
    assert now["spec"]["nodeName"] == SPEC["nodeName"]
