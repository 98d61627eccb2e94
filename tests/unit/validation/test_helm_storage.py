"""Area of concern: Helm release Secrets decode exactly as Helm stores them (double base64, gzip
or not), the latest revision wins, and a broken Secret is reported instead of dropped."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsx.errors import BadInputError
from dsx.validation import helm_storage

Items = Callable[[str], list[dict[str, Any]]]


def test_decodes_shell_encoded_secret_to_the_original_json(recorded_items: Items, data_dir: Path) -> None:
    secret = next(
        s for s in recorded_items("helm/release-secrets.yaml") if s["metadata"]["name"].endswith("operator.v2")
    )
    record = helm_storage.decode_secret_data(secret["data"]["release"], source="s")
    assert record == json.loads((data_dir / "helm" / "gpu-operator.v2.json").read_text())


def test_latest_revision_of_each_release_wins(recorded_items: Items) -> None:
    releases, broken = helm_storage.latest_releases(recorded_items("helm/release-secrets.yaml"))
    assert [(r.namespace, r.name, r.revision, r.version, r.status) for r in releases] == [
        ("cert-manager", "cert-manager", 1, "v1.17.2", "deployed"),
        ("gpu-operator", "gpu-operator", 2, "v25.10.1", "deployed"),
    ]
    gpu_operator = releases[1]
    assert gpu_operator.chart == "gpu-operator"
    assert gpu_operator.values["driver"] == {"version": "580.95.05", "rdma": {"enabled": True}}
    assert [u.fact for u in broken] == ["helm release Secret default/sh.helm.release.v1.broken.v1"]
    assert "not a Helm release payload" in broken[0].reason


def test_revision_order_does_not_depend_on_list_order(recorded_items: Items) -> None:
    items = recorded_items("helm/release-secrets.yaml")
    forward, _ = helm_storage.latest_releases(items)
    backward, _ = helm_storage.latest_releases(list(reversed(items)))
    assert forward == backward


def test_other_secret_types_are_ignored() -> None:
    opaque = {"kind": "Secret", "type": "Opaque", "metadata": {"name": "x"}, "data": {"release": "Zm9v"}}
    assert helm_storage.latest_releases([opaque]) == ((), ())


def test_encode_is_the_inverse_of_decode() -> None:
    record = helm_storage.build_release(
        name="kai-scheduler", namespace="kai", chart="kai-scheduler", version="v0.13.0", values={"a": {"b": [1]}}
    )
    secret = helm_storage.encode_secret(record)
    assert secret["metadata"]["name"] == "sh.helm.release.v1.kai-scheduler.v1"
    assert secret["metadata"]["labels"] == {
        "name": "kai-scheduler",
        "owner": "helm",
        "status": "deployed",
        "version": "1",
    }
    assert secret["type"] == "helm.sh/release.v1"
    assert helm_storage.decode_secret_data(secret["data"]["release"], source="s") == record


def test_encoding_is_deterministic() -> None:
    record = helm_storage.build_release(name="a", namespace="b", chart="c", version="1.0.0", values={"z": 1, "a": 2})
    assert helm_storage.encode_secret_data(record) == helm_storage.encode_secret_data(dict(reversed(record.items())))


@pytest.mark.parametrize("data", ["***", "Zm9v", ""])
def test_garbage_payload_is_bad_input(data: str) -> None:
    with pytest.raises(BadInputError, match="not a Helm release payload"):
        helm_storage.decode_secret_data(data, source="Secret x/y")


def test_a_gzip_bomb_in_a_release_secret_is_refused_without_inflating_it() -> None:
    bomb = gzip.compress(b"[" + b" " * (helm_storage.MAX_RELEASE_BYTES + 1) + b"]")
    data = base64.b64encode(base64.b64encode(bomb)).decode()
    with pytest.raises(BadInputError, match=r"Secret x/y: Helm release inflates past 67108864 bytes"):
        helm_storage.decode_secret_data(data, source="Secret x/y")
