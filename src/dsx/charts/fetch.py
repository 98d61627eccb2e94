"""Fetch a chart at its pinned version from its repository into the chart cache (online only).

Two kinds of source: a Helm repository (`https://…`: `index.yaml` names the archive and its
sha256) and an OCI registry (`oci://host/path`: the registry HTTP API, with an anonymous
bearer token when the registry asks for one). The archive's digest is checked, the chart is
reduced to the cache layout (see dsx.charts.archive) and the cache entry is written in one
rename. Every network or format problem becomes `ChartUnavailable` with the reason, so the
component is reported as `not linted` instead of failing the run.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from dsx import httpclient
from dsx.charts import archive, sources
from dsx.charts import directory as chart_directory
from dsx.errors import BadInputError
from dsx.lint import chart as chart_data
from dsx.model.recipe import ComponentRef

DEFAULT_TIMEOUT_SECONDS = 20.0
"""Per request; a repository slower than this counts as unreachable."""

MAX_DOWNLOAD_BYTES = 128 * 1024 * 1024
"""Large public Helm indexes run to tens of MiB; nothing the lint needs is bigger than this."""

OCI_MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

OFFLINE = "offline: chart not cached"
"""What a component says when the machine has no network: the DNS error itself is said once, by the command."""

_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RepositoryFetcher:
    """A `ChartSource` that downloads from the component's `source` and fills the cache."""

    def __init__(
        self,
        cache_root: Path,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        plain_http_registries: bool = False,
    ) -> None:
        self.cache_root = cache_root
        self.timeout_seconds = timeout_seconds
        self.plain_http_registries = plain_http_registries
        """Talk to OCI registries over http:// (a local test registry), like `helm --plain-http`."""
        self.offline: str | None = None
        """Why the network is out of reach (a name did not resolve), once seen: later charts are not tried."""
        self._indexes: dict[str, Any] = {}
        """Repository indexes (or the reason they could not be read) by URL: one download per run."""

    def chart_for(self, component: ComponentRef) -> chart_data.ChartData:
        if self.offline is not None:
            raise sources.ChartUnavailable(OFFLINE, looked=OFFLINE)
        name = sources.chart_name(component)
        source = component.source.strip()
        if source.startswith("oci://"):
            data, url = self._pull_oci(source, name, component.version)
        elif source.startswith(("https://", "http://")):
            data, url = self._download_from_repository(source, name, component.version)
        elif not source:
            raise sources.ChartUnavailable(f"{name}: no chart source to fetch from")
        else:
            raise sources.ChartUnavailable(f"{source}: unsupported chart source (expected https:// or oci://)")
        try:
            files = archive.cache_layout(archive.unpack_chart(data, source=url), source=url)
        except BadInputError as exc:
            raise sources.ChartUnavailable(str(exc)) from exc
        target = self.cache_root / name / component.version
        try:
            archive.write_cache(target, files)
        except OSError as exc:
            raise sources.ChartUnavailable(f"{target}: cannot write the chart cache: {exc.strerror}") from exc
        try:
            return chart_directory.load_chart_dir(target, name=name, version=component.version, origin=f"fetched {url}")
        except BadInputError as exc:
            raise sources.ChartUnavailable(str(exc)) from exc

    # --- Helm repository ----------------------------------------------------------------------

    def _download_from_repository(self, repository: str, name: str, version: str) -> tuple[bytes, str]:
        index_url = repository.rstrip("/") + "/index.yaml"
        index = self._index(index_url)
        entries = index.get("entries") if isinstance(index, dict) else None
        versions = entries.get(name) if isinstance(entries, dict) else None
        if not isinstance(versions, list):
            raise sources.ChartUnavailable(f"{index_url}: no chart named {name}")
        by_version = {str(e.get("version")): e for e in versions if isinstance(e, dict)}
        entry = next((by_version[v] for v in sources.version_spellings(version) if v in by_version), None)
        if entry is None:
            raise sources.ChartUnavailable(f"{index_url}: {name} has no version {version}")
        urls = entry.get("urls") or []
        if not urls or not isinstance(urls[0], str):
            raise sources.ChartUnavailable(f"{index_url}: {name} {version} lists no archive URL")
        archive_url = urllib.parse.urljoin(index_url, urls[0])
        data = self._get_ok(archive_url).body
        expected = entry.get("digest")
        if expected:
            _check_digest(data, f"sha256:{expected}", archive_url)
        return data, archive_url

    def _index(self, url: str) -> Any:
        if url not in self._indexes:
            try:
                self._indexes[url] = _parse_index(self._get_ok(url).body, url)
            except sources.ChartUnavailable as exc:
                self._indexes[url] = exc
        index = self._indexes[url]
        if isinstance(index, sources.ChartUnavailable):
            raise sources.ChartUnavailable(str(index))
        return index

    # --- OCI registry -------------------------------------------------------------------------

    def _pull_oci(self, source: str, name: str, version: str) -> tuple[bytes, str]:
        host, _, path = source.removeprefix("oci://").strip("/").partition("/")
        repository = f"{path}/{name}" if path else name
        scheme = "http" if self.plain_http_registries else "https"
        base = f"{scheme}://{host}/v2/{repository}"
        token: str | None = None
        manifest_response: httpclient.Response | None = None
        for tag in sources.version_spellings(version.replace("+", "_")):
            response, token = self._registry_get(f"{base}/manifests/{tag}", OCI_MANIFEST_TYPES, token)
            if response.status != 404:
                manifest_response = response
                break
        reference = f"oci://{host}/{repository}:{version}"
        if manifest_response is None:
            raise sources.ChartUnavailable(f"{reference}: no such tag in the registry")
        manifest = _require_ok(manifest_response)
        try:
            layers = json.loads(manifest)["layers"]
            layer = next(item for item in layers if item.get("mediaType") == HELM_CHART_LAYER)
            digest = str(layer["digest"])
        except (ValueError, KeyError, TypeError, StopIteration, AttributeError) as exc:
            raise sources.ChartUnavailable(f"{reference}: the manifest has no Helm chart layer") from exc
        blob, _ = self._registry_get(f"{base}/blobs/{digest}", "*/*", token)
        data = _require_ok(blob)
        _check_digest(data, digest, reference)
        return data, reference

    def _registry_get(self, url: str, accept: str, token: str | None) -> tuple[httpclient.Response, str | None]:
        """GET with the registry's anonymous bearer-token handshake done once, on the first 401."""
        headers = {"Accept": accept}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        response = self._get(url, headers)
        if response.status != 401 or token:
            return response, token
        challenge = response.headers.get("WWW-Authenticate", "")
        if not challenge.lower().startswith("bearer "):
            raise sources.ChartUnavailable(f"{url}: registry requires credentials dsx does not have")
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise sources.ChartUnavailable(f"{url}: registry token realm {realm!r} is not an http(s) URL")
        token_url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params)
        try:
            body = json.loads(self._get_ok(token_url).body)
            token = str(body.get("token") or body.get("access_token") or "")
        except (ValueError, AttributeError) as exc:
            raise sources.ChartUnavailable(f"{token_url}: malformed token response") from exc
        if not token:
            raise sources.ChartUnavailable(f"{token_url}: no anonymous token granted")
        return self._get(url, {**headers, "Authorization": f"Bearer {token}"}), token

    # --- HTTP -------------------------------------------------------------------------------

    def _get_ok(self, url: str) -> httpclient.Response:
        response = self._get(url, {})
        _require_ok(response)
        return response

    def _get(self, url: str, headers: dict[str, str]) -> httpclient.Response:
        """One GET; HTTP error statuses are returned, transport failures become ChartUnavailable."""
        try:
            response = httpclient.request(
                "GET",
                url,
                headers={"User-Agent": "dsx-lint", **headers},
                timeout_seconds=self.timeout_seconds,
                max_bytes=MAX_DOWNLOAD_BYTES,
            )
        except httpclient.TransportError as exc:
            if exc.offline:
                self.offline = f"cannot resolve {urllib.parse.urlsplit(url).hostname}"
                raise sources.ChartUnavailable(OFFLINE, looked=OFFLINE) from exc
            raise sources.ChartUnavailable(str(exc)) from exc
        if response.truncated:
            raise sources.ChartUnavailable(f"{url}: response larger than {MAX_DOWNLOAD_BYTES} bytes")
        return response


def _require_ok(response: httpclient.Response) -> bytes:
    if not 200 <= response.status < 300:
        raise sources.ChartUnavailable(f"{response.url}: HTTP {response.status}")
    return response.body


def _check_digest(data: bytes, expected: str, where: str) -> None:
    algorithm, _, hex_digest = expected.partition(":")
    if algorithm != "sha256":
        raise sources.ChartUnavailable(f"{where}: unsupported digest algorithm {algorithm!r}")
    actual = hashlib.sha256(data).hexdigest()
    if actual != hex_digest.lower():
        raise sources.ChartUnavailable(f"{where}: digest mismatch (expected sha256:{hex_digest}, got sha256:{actual})")


def _parse_index(body: bytes, url: str) -> Any:
    try:
        return chart_data.parse_yaml_fast(body, source=url)
    except BadInputError as exc:
        raise sources.ChartUnavailable(str(exc)) from exc
