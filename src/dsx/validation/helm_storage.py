"""Helm releases read back from Helm's own storage, so no Helm binary or chart repo is needed.

Helm 3 keeps each revision of a release in a Secret named `sh.helm.release.v1.<name>.v<N>`,
of type `helm.sh/release.v1`, labelled `owner=helm`, `name`, `status` and `version`. Its
`data.release` is the release as JSON, gzip-compressed and base64-encoded by Helm — and, since
Secret data is bytes, base64-encoded once more by Kubernetes. Older Helm versions wrote the
JSON without gzip; the gzip magic bytes tell the two apart, as Helm's own decoder does.

`encode_secret` is the exact inverse; the simulator and the integration tests use it to install
releases in Helm's real format.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError
from dsx.model import snapshot

RELEASE_STORAGE_TYPE = "helm.sh/release.v1"
RELEASE_OBJECT_PREFIX = "sh.helm.release.v1."
OWNER_LABELS = {"owner": "helm"}
_GZIP_MAGIC = b"\x1f\x8b\x08"


MAX_RELEASE_BYTES = 64 * 2**20
"""A release's JSON after gunzip: a Secret holds 1 MiB, which a gzip bomb turns into a gigabyte."""


def _gunzip(data: bytes, source: str) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, MAX_RELEASE_BYTES)
    if inflater.unconsumed_tail:
        limit = MAX_RELEASE_BYTES
        raise BadInputError(f"{source}: Helm release inflates past {limit} bytes (limit {limit})")
    if not inflater.eof:
        raise BadInputError(f"{source}: not a Helm release payload: truncated gzip data")
    return out


def decode_secret_data(data: str, *, source: str) -> dict[str, Any]:
    """The release JSON from a Secret's `data.release` (the Kubernetes base64 layer included)."""
    try:
        helm_text = base64.b64decode(data, validate=True)
        payload = base64.b64decode(helm_text, validate=True)
        if payload.startswith(_GZIP_MAGIC):
            payload = _gunzip(payload, source)
    except (binascii.Error, OSError, EOFError, zlib.error, ValueError) as exc:
        raise BadInputError(f"{source}: not a Helm release payload: {exc}") from exc
    try:
        release = serialization.parse_json(payload, source="release JSON")
    except BadInputError as exc:
        raise BadInputError(f"{source}: not a Helm release payload: {exc}") from exc
    if not isinstance(release, dict):
        raise BadInputError(f"{source}: Helm release payload is not a JSON object")
    return release


def encode_secret_data(release: Mapping[str, Any]) -> str:
    """`data.release` for a Secret holding `release`: JSON → gzip → base64 (Helm) → base64 (Kubernetes)."""
    raw = json.dumps(release, separators=(",", ":"), sort_keys=True).encode()
    helm_text = base64.b64encode(gzip.compress(raw, mtime=0))
    return base64.b64encode(helm_text).decode("ascii")


def encode_secret(release: Mapping[str, Any]) -> dict[str, Any]:
    """A Secret object exactly as Helm would store `release` (name, type, labels, data)."""
    name = str(release["name"])
    revision = int(release["version"])
    status = str((release.get("info") or {}).get("status") or "deployed")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{RELEASE_OBJECT_PREFIX}{name}.v{revision}",
            "namespace": str(release["namespace"]),
            "labels": {"name": name, "owner": "helm", "status": status, "version": str(revision)},
        },
        "type": RELEASE_STORAGE_TYPE,
        "data": {"release": encode_secret_data(release)},
    }


def build_release(
    *,
    name: str,
    namespace: str,
    chart: str,
    version: str,
    values: Mapping[str, Any],
    revision: int = 1,
    status: str = "deployed",
    app_version: str = "",
) -> dict[str, Any]:
    """A release record with the fields Helm writes (timestamps fixed, templates omitted)."""
    deployed = "2026-01-01T00:00:00Z"
    return {
        "name": name,
        "info": {
            "first_deployed": deployed,
            "last_deployed": deployed,
            "deleted": "",
            "description": "Install complete" if revision == 1 else "Upgrade complete",
            "status": status,
        },
        "chart": {
            "metadata": {"name": chart, "version": version, "appVersion": app_version or version, "apiVersion": "v2"},
            "lock": None,
            "templates": [],
            "values": {},
            "schema": None,
            "files": [],
        },
        "config": dict(values),
        "manifest": "",
        "version": revision,
        "namespace": namespace,
    }


def release_from_record(record: Mapping[str, Any], *, source: str) -> snapshot.HelmRelease:
    """The snapshot's view of one decoded release record."""
    chart = (record.get("chart") or {}).get("metadata") or {}
    info = record.get("info") or {}
    revision = record.get("version")
    if not isinstance(revision, int) or not record.get("name"):
        raise BadInputError(f"{source}: Helm release record lacks name or version")
    config = record.get("config") or {}
    if not isinstance(config, Mapping):
        raise BadInputError(f"{source}: Helm release config is not a mapping")
    return snapshot.HelmRelease(
        name=str(record["name"]),
        namespace=str(record.get("namespace") or ""),
        revision=revision,
        chart=str(chart.get("name") or ""),
        version=str(chart.get("version") or ""),
        status=str(info.get("status") or "unknown"),
        app_version=str(chart.get("appVersion") or ""),
        values=dict(config),
    )


def latest_releases(
    secrets: Iterable[Mapping[str, Any]],
) -> tuple[tuple[snapshot.HelmRelease, ...], tuple[snapshot.Unreadable, ...]]:
    """The highest revision of each release (as `helm list` shows it), and the Secrets that would not decode.

    Secrets of another type are ignored; a Secret that claims to be a Helm release but does
    not decode is reported, not skipped silently.
    """
    latest: dict[tuple[str, str], snapshot.HelmRelease] = {}
    broken: list[snapshot.Unreadable] = []
    for secret in secrets:
        meta = secret.get("metadata") or {}
        where = f"Secret {meta.get('namespace', '')}/{meta.get('name', '')}"
        if secret.get("type") != RELEASE_STORAGE_TYPE:
            continue
        data = (secret.get("data") or {}).get("release")
        try:
            if not isinstance(data, str):
                raise BadInputError(f"{where}: no data.release")
            release = release_from_record(decode_secret_data(data, source=where), source=where)
        except BadInputError as exc:
            broken.append(snapshot.Unreadable(f"helm release {where}", str(exc)))
            continue
        key = (release.namespace, release.name)
        if key not in latest or release.revision > latest[key].revision:
            latest[key] = release
    ordered = tuple(latest[k] for k in sorted(latest))
    return ordered, tuple(sorted(broken, key=lambda u: u.fact))
