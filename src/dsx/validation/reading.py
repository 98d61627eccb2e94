"""What validation needs from a cluster: its version and objects by kind, read-only.

A narrow port on purpose: snapshot collection, the deployment and conformance phases all work
on plain object dicts (as the API server returns them), so the adapter
(dsx.kube) only lists, and the verdicts are pure functions over what it listed.

Errors follow the dsx tree: a kind the server does not serve (a CRD not installed) raises
`NotFoundError`, an RBAC denial `ForbiddenError`, an unreachable server `UnavailableError`.
`DENIED` is the pair a check catches to report `skipped` instead of a verdict it cannot reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from dsx.errors import ForbiddenError, NotFoundError, UnauthorizedError

DENIED = (ForbiddenError, UnauthorizedError)


class ClusterReader(Protocol):
    """Read-only access to one cluster."""

    def server_version(self) -> dict[str, Any]:
        """The API server's /version document; `gitVersion` is e.g. `v1.33.5-eks-3025e55`."""
        ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Every object of `kind` (all namespaces when `namespace` is None) carrying all of `labels`."""
        ...


def with_kind(objects: Iterable[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Copies with `kind` set (list responses leave it out of the items)."""
    return [{**o, "kind": o.get("kind") or kind} for o in objects]


class LiveObjects:
    """Objects read once per (kind, namespace) for one validation run; a kind not served reads as none.

    The deployment and conformance phases ask for the same Pods, Nodes and DaemonSets many
    times; one listing each keeps a run to a handful of API calls. A denied listing raises
    the same ForbiddenError (or UnauthorizedError) every time it is asked for, without asking
    the server again, so each check that needs it can report `skipped` with the reason.
    """

    def __init__(self, reader: ClusterReader) -> None:
        self.reader = reader
        self._cache: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {}
        self._denied: dict[tuple[str, str, str | None], ForbiddenError | UnauthorizedError] = {}

    def objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        key = (api_version, kind, namespace)
        if key in self._denied:
            raise self._denied[key]
        if key not in self._cache:
            try:
                found = self.reader.list(api_version, kind, namespace)
            except NotFoundError:
                found = []
            except DENIED as exc:
                self._denied[key] = exc
                raise
            self._cache[key] = sorted(
                with_kind(found, kind),
                key=lambda o: ((o.get("metadata") or {}).get("namespace") or "", (o.get("metadata") or {}).get("name")),
            )
        return self._cache[key]
