from __future__ import annotations

import io
import zipfile

import yaml
from fastapi.testclient import TestClient

from dsx.api import app as api_app
from dsx.api import security

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

CRITERIA = {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training", "platform": "kubeflow"}


def test_probes_and_docs_are_open_everything_else_needs_a_token(client: TestClient) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs"):
        assert client.get(path).status_code == 200, path
    for path in ("/v1/recipe", "/metrics", "/docs/", "/openapi.json/x", "/v1/sentinel/nodes"):
        response = client.get(path)
        assert response.status_code == 401, path
        assert response.json()["error"]["code"] == "UNAUTHORIZED"
    assert client.get("/v1/recipe", headers={"Authorization": "Bearer nope-nope-nope-nope"}).status_code == 401


def test_recipe_get_and_post_agree(client: TestClient) -> None:
    got = client.get("/v1/recipe", params=CRITERIA, headers=AUTH)
    posted = client.post("/v1/recipe", json=CRITERIA, headers=AUTH)
    assert got.status_code == posted.status_code == 200
    assert got.json() == posted.json()
    doc = got.json()
    assert doc["kind"] == "Recipe"
    order = doc["deploymentOrder"]
    for ref in doc["componentRefs"]:
        for dep in ref["dependencyRefs"]:
            assert order.index(dep) < order.index(ref["name"])


def test_bad_criteria_is_400_listing_allowed_values(client: TestClient) -> None:
    response = client.get("/v1/recipe", params={**CRITERIA, "accelerator": "h900"}, headers=AUTH)
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "INVALID_REQUEST"
    assert "h100" in body["error"]["message"]
    assert "Traceback" not in response.text


def test_query_scalar_and_missing_path(client: TestClient) -> None:
    ok = client.get(
        "/v1/query", params={**CRITERIA, "selector": "components.gpu-operator.values.driver.version"}, headers=AUTH
    )
    assert ok.status_code == 200
    assert isinstance(ok.json()["value"], str) and ok.json()["value"]
    missing = client.post(
        "/v1/query", json={**CRITERIA, "selector": "components.gpu-operator.values.nope.deeper"}, headers=AUTH
    )
    assert missing.status_code == 404
    assert "components.gpu-operator.values" in missing.json()["error"]["message"]


def test_bundle_zip_is_deterministic_and_complete(client: TestClient) -> None:
    body = {"deployer": "argocd", "criteria": CRITERIA}
    first = client.post("/v1/bundle", json=body, headers=AUTH)
    second = client.post("/v1/bundle", json=body, headers=AUTH)
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/zip"
    assert first.content == second.content
    names = zipfile.ZipFile(io.BytesIO(first.content)).namelist()
    assert "checksums.txt" in names and "bundle.json" in names
    for name in names:
        if name.endswith((".yaml", ".yml")):
            list(yaml.safe_load_all(zipfile.ZipFile(io.BytesIO(first.content)).read(name)))


def test_oversized_request_is_413(client: TestClient) -> None:
    big = {"deployer": "helm", "recipe": {"padding": "x" * (128 * 1024)}}
    response = client.post("/v1/bundle", json=big, headers=AUTH)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_rate_limit_answers_429_with_retry_after() -> None:
    settings = api_app.ApiSettings(token_digests=frozenset({security._digest(TOKEN)}), rate_per_second=0.5, burst=2)
    with TestClient(api_app.create_app(settings)) as client:
        codes = [client.get("/metrics", headers=AUTH).status_code for _ in range(3)]
        assert codes[:2] == [200, 200]
        assert codes[2] == 429
        limited = client.get("/metrics", headers=AUTH)
        assert int(limited.headers["retry-after"]) >= 1


def test_metrics_count_requests(client: TestClient) -> None:
    client.get("/v1/recipe", params=CRITERIA, headers=AUTH)
    text = client.get("/metrics", headers=AUTH).text
    assert 'dsx_api_requests_total{route="/v1/recipe",status="200"}' in text
