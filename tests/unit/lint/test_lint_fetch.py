"""Area of concern: fetching charts online — a Helm repository and an OCI registry served on 127.0.0.1.

Real chart repositories are out of reach from CI, so a local HTTP server serves a generated
`index.yaml`, chart archives and the OCI registry endpoints (with the anonymous-token handshake).
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import tarfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dsx import serialization
from dsx.charts import archive, fetch, sources
from dsx.errors import BadInputError
from dsx.lint import check
from dsx.model.recipe import ComponentRef, Recipe
from dsx.settings.folders import PathSettings


def _folders(cache: Path) -> PathSettings:
    """Folders whose cache root is `cache` (charts and parsed chart data under it)."""
    return PathSettings(cache_dir=cache, state_dir=cache.parent / "state")


TOKEN = "anonymous-pull-token"


def chart_archive(name: str, files: dict[str, str | bytes], *, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info, io.BytesIO(b"x" * info.size))
    return buffer.getvalue()


def demo_chart() -> bytes:
    subchart = chart_archive(
        "redis",
        {
            "Chart.yaml": "apiVersion: v2\nname: redis\nversion: 18.0.0\n",
            "values.yaml": "port: 6379\nauth:\n  enabled: true\n",
            "templates/svc.yaml": "port: {{ .Values.port }}\nauth: {{ .Values.auth.enabled }}\n",
        },
    )
    return chart_archive(
        "demo",
        {
            "Chart.yaml": (
                "apiVersion: v2\nname: demo\nversion: 1.2.0\n"
                "dependencies:\n  - name: redis\n    alias: cache\n    condition: cache.enabled\n"
            ),
            "values.yaml": "image:\n  tag: v1\n  # legacy: x  -- deprecated, use tag instead\nreplicas: 1\n",
            "values.schema.json": json.dumps({"properties": {"replicas": {"type": "integer"}}}),
            "templates/deploy.yaml": (
                "replicas: {{ .Values.replicas }}\nimage: {{ .Values.image.tag }}\n"
                "{{- with .Values.podLabels }}labels: {{ toYaml . }}{{ end }}\n"
            ),
            "charts/redis-18.0.0.tgz": subchart,
        },
    )


@dataclass
class ChartServer:
    url: str
    routes: dict[str, tuple[int, dict[str, str], bytes]]
    requests: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")


@pytest.fixture
def chart_server() -> Iterator[ChartServer]:
    server_state = ChartServer(url="", routes={})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server_state.requests.append(self.path)
            if self.path.startswith("/v2/") and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                challenge = f'Bearer realm="{server_state.url}/token",service="test",scope="repository:charts:pull"'
                self._reply(401, {"WWW-Authenticate": challenge}, b"{}")
                return
            if self.path.startswith("/token?"):
                assert "service=test" in self.path and "scope=repository" in self.path
                self._reply(200, {"Content-Type": "application/json"}, json.dumps({"token": TOKEN}).encode())
                return
            status, headers, body = server_state.routes.get(self.path, (404, {}, b"not found"))
            self._reply(status, headers, body)

        def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def serve_helm_repository(server: ChartServer, data: bytes, *, digest: str | None = None) -> None:
    index = {
        "apiVersion": "v1",
        "entries": {
            "demo": [
                {
                    "name": "demo",
                    "version": "1.2.0",
                    "urls": ["charts/demo-1.2.0.tgz"],
                    "digest": digest or hashlib.sha256(data).hexdigest(),
                },
                {"name": "demo", "version": "1.1.0", "urls": ["charts/demo-1.1.0.tgz"]},
            ]
        },
    }
    server.routes["/repo/index.yaml"] = (200, {}, serialization.dump_yaml(index).encode())
    server.routes["/repo/charts/demo-1.2.0.tgz"] = (200, {}, data)


def test_a_helm_repository_chart_is_fetched_reduced_and_cached(
    chart_server: ChartServer, tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    serve_helm_repository(chart_server, demo_chart())
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache", timeout_seconds=10)

    chart = fetcher.chart_for(helm_component("demo", "v1.2.0", {}, source=f"{chart_server.url}/repo"))

    cached = tmp_path / "cache" / "demo" / "v1.2.0"
    assert (cached / "values-refs.txt").read_text() == "image.tag\npodLabels\nreplicas\n"
    assert (cached / "subcharts.txt").read_text() == "cache\n"
    assert (cached / "charts" / "cache" / "values-refs.txt").read_text() == "auth.enabled\nport\n"
    assert (cached / "values.schema.json").is_file()
    assert chart.origin == f"fetched {chart_server.url}/repo/charts/demo-1.2.0.tgz"
    assert ("cache", "enabled") in chart.values_refs
    assert chart.subchart_data["cache"].defaults == {"port": 6379, "auth": {"enabled": True}}
    assert chart.schema == {"properties": {"replicas": {"type": "integer"}}}


def test_lint_through_the_default_chain_fetches_once_then_reads_the_cache(
    chart_server: ChartServer,
    tmp_path: Path,
    helm_component: Callable[..., ComponentRef],
    recipe_of: Callable[..., Recipe],
) -> None:
    serve_helm_repository(chart_server, demo_chart())
    values = {"replicas": "two", "image": {"tga": "v2"}, "podLabels": {"team": "a"}, "cache": {"prot": 1}}
    recipe = recipe_of(helm_component("demo", "1.2.0", values, source=f"{chart_server.url}/repo"))
    source = sources.default_source(paths=_folders(tmp_path / "cache"))

    first = check.lint_recipe(recipe, source)
    downloads = len(chart_server.requests)
    second = check.lint_recipe(recipe, source)

    assert [(f.path, f.suggestion) for f in first.findings] == [
        ("cache.prot", "cache.port"),
        ("image.tga", "image.tag"),
        ("replicas", None),
    ]
    assert first.to_dict()["findings"] == second.to_dict()["findings"]
    assert downloads == 2
    assert len(chart_server.requests) == downloads
    assert second.linted[0].origin == "chart cache demo/1.2.0"


def test_a_digest_mismatch_is_not_linted_and_nothing_is_cached(
    chart_server: ChartServer, tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    serve_helm_repository(chart_server, demo_chart(), digest="0" * 64)
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache", timeout_seconds=10)

    with pytest.raises(sources.ChartUnavailable, match="digest mismatch"):
        fetcher.chart_for(helm_component("demo", "1.2.0", {}, source=f"{chart_server.url}/repo"))
    assert not (tmp_path / "cache" / "demo").exists()


def test_a_missing_chart_or_version_names_the_index(
    chart_server: ChartServer, tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    serve_helm_repository(chart_server, demo_chart())
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache", timeout_seconds=10)
    repo = f"{chart_server.url}/repo"

    with pytest.raises(sources.ChartUnavailable, match=r"index\.yaml: demo has no version 9\.9\.9"):
        fetcher.chart_for(helm_component("demo", "9.9.9", {}, source=repo))
    with pytest.raises(sources.ChartUnavailable, match=r"index\.yaml: no chart named other"):
        fetcher.chart_for(helm_component("other", "1.0.0", {}, source=repo))
    with pytest.raises(sources.ChartUnavailable, match=r"/nowhere/index\.yaml: HTTP 404"):
        fetcher.chart_for(helm_component("demo", "1.2.0", {}, source=f"{chart_server.url}/nowhere"))
    with pytest.raises(sources.ChartUnavailable, match=r"/nowhere/index\.yaml: HTTP 404"):
        fetcher.chart_for(helm_component("other", "1.0.0", {}, source=f"{chart_server.url}/nowhere"))
    assert chart_server.requests.count("/repo/index.yaml") == 1
    assert chart_server.requests.count("/nowhere/index.yaml") == 1


def test_a_malformed_index_is_unavailable_with_the_line(
    chart_server: ChartServer, tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    chart_server.routes["/bad/index.yaml"] = (200, {}, b"entries:\n  demo: [unclosed\n")
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache", timeout_seconds=10)

    with pytest.raises(sources.ChartUnavailable, match=r"/bad/index\.yaml: malformed YAML \(line 3"):
        fetcher.chart_for(helm_component("demo", "1.2.0", {}, source=f"{chart_server.url}/bad"))


def test_an_unreachable_repository_is_reported_not_linted(
    tmp_path: Path, helm_component: Callable[..., ComponentRef], recipe_of: Callable[..., Recipe]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    component = helm_component("demo", "1.2.0", {"a": 1}, source=f"http://127.0.0.1:{closed_port}/repo")
    source = sources.default_source(paths=_folders(tmp_path / "cache"))

    report = check.lint_recipe(recipe_of(component), source)

    assert report.ok
    assert [n.component for n in report.not_linted] == ["demo"]
    assert "cannot connect" in report.not_linted[0].reason
    assert report.not_linted[0].reason.startswith("no chart data for demo 1.2.0: not in chart cache (")
    assert "; not in dsx catalog; " in report.not_linted[0].reason


def test_offline_lookup_never_touches_the_network(
    chart_server: ChartServer,
    tmp_path: Path,
    helm_component: Callable[..., ComponentRef],
    recipe_of: Callable[..., Recipe],
) -> None:
    serve_helm_repository(chart_server, demo_chart())
    component = helm_component("demo", "1.2.0", {"a": 1}, source=f"{chart_server.url}/repo")

    report = check.lint_recipe(
        recipe_of(component), sources.default_source(paths=_folders(tmp_path / "c"), offline=True)
    )

    assert chart_server.requests == []
    assert report.not_linted[0].reason.endswith("(offline)")


def test_an_oci_chart_is_pulled_with_an_anonymous_token(
    chart_server: ChartServer, tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    data = demo_chart()
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    manifest = {
        "schemaVersion": 2,
        "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": "sha256:00", "size": 2},
        "layers": [{"mediaType": fetch.HELM_CHART_LAYER, "digest": digest, "size": len(data)}],
    }
    chart_server.routes["/v2/charts/demo/manifests/v1.2.0"] = (200, {}, json.dumps(manifest).encode())
    chart_server.routes[f"/v2/charts/demo/blobs/{digest}"] = (200, {}, data)
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache", timeout_seconds=10, plain_http_registries=True)

    chart = fetcher.chart_for(helm_component("demo", "1.2.0", {}, source=f"oci://{chart_server.host}/charts"))

    assert chart.origin == f"fetched oci://{chart_server.host}/charts/demo:1.2.0"
    assert ("image", "tag") in chart.values_refs
    assert sum(1 for r in chart_server.requests if r.startswith("/token")) == 1
    assert (tmp_path / "cache" / "demo" / "1.2.0" / "values.yaml").is_file()


def test_an_oci_tag_that_does_not_exist_is_not_linted(
    chart_server: ChartServer, tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache", timeout_seconds=10, plain_http_registries=True)

    with pytest.raises(sources.ChartUnavailable, match="no such tag"):
        fetcher.chart_for(helm_component("demo", "3.0.0", {}, source=f"oci://{chart_server.host}/charts"))


def test_sources_that_cannot_be_fetched_say_why(tmp_path: Path, helm_component: Callable[..., ComponentRef]) -> None:
    fetcher = fetch.RepositoryFetcher(tmp_path / "cache")

    with pytest.raises(sources.ChartUnavailable, match="unsupported chart source"):
        fetcher.chart_for(helm_component("demo", "1.0.0", {}, source="git://example.invalid/charts"))
    with pytest.raises(sources.ChartUnavailable, match="no chart source"):
        fetcher.chart_for(helm_component("demo", "1.0.0", {}))


def test_archive_members_outside_the_chart_are_ignored() -> None:
    traversal = tarfile.TarInfo("demo/../../evil.txt")
    traversal.size = 4
    absolute = tarfile.TarInfo("/etc/evil")
    absolute.size = 4
    link = tarfile.TarInfo("demo/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    data = chart_archive(
        "demo", {"Chart.yaml": "name: demo\n", "values.yaml": "a: 1\n"}, extra=[traversal, absolute, link]
    )

    files = archive.unpack_chart(data, source="test.tgz")

    assert sorted(files) == ["Chart.yaml", "values.yaml"]


def test_an_archive_that_is_not_a_chart_is_refused() -> None:
    with pytest.raises(BadInputError, match="not a readable chart archive"):
        archive.unpack_chart(b"not gzip", source="x.tgz")
    with pytest.raises(BadInputError, match=r"no Chart\.yaml"):
        archive.unpack_chart(chart_archive("demo", {"values.yaml": "a: 1\n"}), source="x.tgz")


def test_without_a_network_each_chart_says_offline_and_the_dns_error_is_kept_once(
    tmp_path: Path, helm_component: Callable[..., ComponentRef], recipe_of: Callable[..., Recipe]
) -> None:
    # .invalid never resolves (RFC 2606): what a machine without DNS sees for every repository
    first = helm_component("demo", "1.2.0", {"a": 1}, source="https://charts.dsx-test.invalid/repo")
    second = helm_component("other", "2.0.0", {"b": 1}, source="https://other.dsx-test.invalid/repo")
    source = sources.default_source(paths=_folders(tmp_path / "cache"))

    report = check.lint_recipe(recipe_of(first, second), source)

    assert report.ok
    assert [n.component for n in report.not_linted] == ["demo", "other"]
    assert all(n.reason.endswith("; offline: chart not cached") for n in report.not_linted)
    assert not any("Errno" in n.reason or "resolve" in n.reason for n in report.not_linted)
    assert sources.offline_reason(source) == "cannot resolve charts.dsx-test.invalid"  # the second was not tried
