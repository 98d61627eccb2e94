"""InMemoryMaintenanceRequests: MaintenanceRequest objects in memory, beside the MaintenanceRequests port.

It keeps the apiserver's rules the controller depends on (tests/contracts/maintenance holds it
and the Kubernetes adapter to the same cases): a delete of an object with finalizers only sets
`deletionTimestamp`, the object goes once the last finalizer is removed, a finalizer write with
a stale resourceVersion is a ConflictError, and every write moves the resourceVersion.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from dsx.errors import ConflictError, NotFoundError
from dsx.health.decisions.maintenance import API_VERSION, KIND


class InMemoryMaintenanceRequests:
    """MaintenanceRequests over dicts; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Any]] = {}
        self._version = 0

    # setup, as a person with kubectl would
    def create(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            if name in self._objects:
                raise ConflictError(f"MaintenanceRequest {name} already exists")
            obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": dict(spec)}
            self._objects[name] = obj
            self._bump(obj)
            return copy.deepcopy(obj)

    def delete(self, name: str) -> bool:
        """Delete: gone at once without finalizers, else marked for deletion. False when absent."""
        with self._lock:
            obj = self._objects.get(name)
            if obj is None:
                return False
            if not obj["metadata"].get("finalizers"):
                del self._objects[name]
            elif not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                self._bump(obj)
            return True

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._objects.get(name)
            return copy.deepcopy(found) if found is not None else None

    # the port
    def list_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(o) for _, o in sorted(self._objects.items())]

    def set_finalizers(self, name: str, finalizers: Sequence[str], *, resource_version: str) -> dict[str, Any]:
        with self._lock:
            obj = self._find(name)
            if obj["metadata"]["resourceVersion"] != resource_version:
                raise ConflictError(f"MaintenanceRequest {name}: the object has been modified")
            if obj["metadata"].get("deletionTimestamp") and set(finalizers) - set(
                obj["metadata"].get("finalizers", [])
            ):
                raise ConflictError(f"MaintenanceRequest {name}: no new finalizers on an object being deleted")
            obj["metadata"]["finalizers"] = list(finalizers)
            if not finalizers:
                obj["metadata"].pop("finalizers")
                if obj["metadata"].get("deletionTimestamp"):
                    del self._objects[name]
                    return copy.deepcopy(obj)
            self._bump(obj)
            return copy.deepcopy(obj)

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        with self._lock:
            obj = self._find(name)
            obj["status"] = {**obj.get("status", {}), **copy.deepcopy(dict(status))}
            self._bump(obj)

    def _find(self, name: str) -> dict[str, Any]:
        obj = self._objects.get(name)
        if obj is None:
            raise NotFoundError(f"MaintenanceRequest {name} not found")
        return obj

    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
