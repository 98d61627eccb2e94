"""The fake of `dsx.validation.reading.ClusterReader`: a cluster's objects held in memory.

tests/contracts/cluster_reading runs it and `dsx.kube.client.KubeClient` through the same cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsx.errors import ForbiddenError, NotFoundError


@dataclass
class FakeClusterReader:
    """In-memory `ClusterReader` for unit tests: objects are matched by kind, namespace and labels.

    `missing_kinds` simulates kinds the server does not serve; `forbidden_kinds` RBAC denials.
    """

    version: str = "v1.34.1"
    objects: list[dict[str, Any]] = field(default_factory=list)
    missing_kinds: set[str] = field(default_factory=set)
    forbidden_kinds: set[str] = field(default_factory=set)

    def add(self, *objects: Mapping[str, Any]) -> FakeClusterReader:
        self.objects.extend(dict(o) for o in objects)
        return self

    def server_version(self) -> dict[str, Any]:
        return {"gitVersion": self.version}

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        if kind in self.missing_kinds:
            raise NotFoundError(f"the server does not serve {api_version} {kind}")
        if kind in self.forbidden_kinds:
            raise ForbiddenError(f"forbidden: cannot list {kind}")
        wanted = dict(labels or {})
        return [
            o
            for o in self.objects
            if o.get("kind") == kind
            and (namespace is None or (o.get("metadata") or {}).get("namespace") == namespace)
            and all(((o.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]
