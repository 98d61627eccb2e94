"""Contract: `ClusterReader` (dsx.validation.reading) — the fake and the Kubernetes client agree.

`dsx.testing.cluster_reader.FakeClusterReader` serves the validation unit tests;
`dsx.kube.client.KubeClient` reads a real kube-apiserver (dsx sim). Both are given the same
objects (ConfigMaps in a namespace of the test's own) and answer the same questions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dsx import errors
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation.reading import ClusterReader

RUN_LABEL = "contract.dsx.run/run"
UNSERVED = ("widgets.contract.dsx.run/v1", "Widget")
"""A kind no server serves (no such CRD): reading it is NotFoundError."""


@dataclass
class Cluster:
    reader: ClusterReader
    add: Callable[[dict[str, Any]], object]
    namespace: str
    run: str


def _config_map(name: str, namespace: str, run: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: run, "app": app}},
        "data": {"k": "v"},
    }


@pytest.fixture(params=["fake", pytest.param("kube", marks=pytest.mark.integration)])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    run = uuid.uuid4().hex[:8]
    if request.param == "fake":
        fake = FakeClusterReader(missing_kinds={UNSERVED[1]})
        yield Cluster(fake, fake.add, f"ns-{run}", run)
        return
    client = request.getfixturevalue("kube_client")
    namespace = request.getfixturevalue("sim_namespace")
    yield Cluster(client, client.create, namespace, run)


def _names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


@pytest.fixture
def seeded(cluster: Cluster) -> Cluster:
    cluster.add(_config_map("a", cluster.namespace, cluster.run, "x"))
    cluster.add(_config_map("b", cluster.namespace, cluster.run, "y"))
    return cluster


def test_server_version_names_a_kubernetes_release(cluster: Cluster) -> None:
    assert cluster.reader.server_version()["gitVersion"].startswith("v1.")


def test_list_by_namespace(seeded: Cluster) -> None:
    assert _names(seeded.reader.list("v1", "ConfigMap", seeded.namespace, labels={RUN_LABEL: seeded.run})) == [
        "a",
        "b",
    ]


def test_list_across_namespaces_selects_by_every_label(seeded: Cluster) -> None:
    assert _names(seeded.reader.list("v1", "ConfigMap", labels={RUN_LABEL: seeded.run})) == ["a", "b"]
    assert _names(seeded.reader.list("v1", "ConfigMap", labels={RUN_LABEL: seeded.run, "app": "x"})) == ["a"]
    assert seeded.reader.list("v1", "ConfigMap", labels={RUN_LABEL: seeded.run, "app": "z"}) == []


def test_list_in_another_namespace_finds_none_of_them(seeded: Cluster) -> None:
    assert seeded.reader.list("v1", "ConfigMap", f"{seeded.namespace}-other", labels={RUN_LABEL: seeded.run}) == []


def test_a_kind_the_server_does_not_serve_is_not_found(cluster: Cluster) -> None:
    with pytest.raises(errors.NotFoundError):
        cluster.reader.list(*UNSERVED)
