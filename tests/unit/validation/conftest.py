"""Fixtures for the validation unit tests: recorded API objects served by the in-memory reader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.validation import reading

DATA = Path(__file__).resolve().parents[2] / "data" / "validation"


def load_items(relative: str) -> list[dict[str, Any]]:
    """The `items` of a recorded `kubectl get -o yaml` List."""
    doc = serialization.load_mapping_file(DATA / relative)
    items: list[dict[str, Any]] = doc["items"]
    return items


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def recorded_items() -> Callable[[str], list[dict[str, Any]]]:
    return load_items


@pytest.fixture
def recorded_cluster() -> reading.FakeClusterReader:
    """An EKS cluster with one H100 node, one CPU node and Helm release Secrets, as recorded."""
    reader = reading.FakeClusterReader(version="v1.33.5-eks-3025e55")
    reader.add(*load_items("cluster/nodes.yaml"), *load_items("helm/release-secrets.yaml"))
    return reader
