"""Area of concern: the API can be explored (issue 16, item 4) — /docs works offline and without a
token, the OpenAPI document states the bearer scheme, the real error model and typed bodies, and
every error (unknown routes, wrong methods, form bodies) comes in the dsx shape."""

from __future__ import annotations

import re

import msgspec
from fastapi.testclient import TestClient

from dsx.api import app as api_app
from dsx.api import schemas, security

from .conftest import AUTH


def test_docs_page_is_open_and_loads_nothing_from_outside(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    linked = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: ?'([^']+)'", page.text)
    assert sorted(linked) == [
        "/docs/favicon.png",
        "/docs/swagger-ui-bundle.js",
        "/docs/swagger-ui.css",
        "/openapi.json",
    ]
    assert "cdn" not in page.text and "https://" not in page.text
    for asset in linked:
        answer = client.get(asset)
        assert answer.status_code == 200 and len(answer.content) > 1000, asset
    assert "SwaggerUIBundle" in client.get("/docs/swagger-ui-bundle.js").text
    # nothing in the request chooses the file: a query parameter is ignored, other paths need a token
    assert (
        client.get("/docs/swagger-ui.css", params={"name": "../../__init__.py"}).content
        == client.get("/docs/swagger-ui.css").content
    )
    assert client.get("/docs/../dsx/__init__.py").status_code in (401, 404)
    assert client.get("/docs/index.html").status_code == 401


def test_every_protected_operation_declares_the_bearer_scheme_and_the_error_model(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert document["components"]["securitySchemes"] == {
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": schemas.finish({})["components"]["securitySchemes"]["bearerAuth"]["description"],
        }
    }
    assert "HTTPValidationError" not in document["components"]["schemas"]
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    operations = [(p, m, o) for p, ops in document["paths"].items() for m, o in ops.items()]
    assert len(operations) >= 15
    for path, method, operation in operations:
        where = f"{method.upper()} {path}"
        responses = operation["responses"]
        assert (operation.get("security") == [{"bearerAuth": []}]) == security.needs_token(path), where
        for status, answer in responses.items():
            if status.startswith(("4", "5")):
                assert answer["content"]["application/json"]["schema"] == error_ref, (where, status)
        if security.needs_token(path):
            assert {"401", "429", "500"} <= set(responses), where
        if "requestBody" in operation:
            assert {"400", "413", "415"} <= set(responses), where
        ok = responses.get("200") or responses["202"]
        body = ok["content"].get("application/json")
        if body is not None:
            assert "$ref" in body["schema"], f"{where}: untyped response body"


def test_print_openapi_is_complete_without_a_store() -> None:
    document = api_app.create_app(api_app.ApiSettings()).openapi()
    assert {"/v1/sentinel/nodes", "/v1/sentinel/events", "/v1/certifications", "/v1/validate"} <= set(document["paths"])
    assert set(document["paths"]["/v1/sentinel/events"]) == {"get", "post"}


def test_sentinel_routes_without_a_store_name_the_flag(client: TestClient) -> None:
    answer = client.get("/v1/sentinel/nodes", headers=AUTH)
    assert answer.status_code == 404
    assert "--store" in answer.json()["error"]["message"]


def test_unknown_routes_and_methods_answer_in_the_dsx_shape(client: TestClient) -> None:
    missing = client.get("/v1/nothing", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "code": "NOT_FOUND",
        "message": "no route /v1/nothing; the routes are listed at /docs",
    }
    wrong = client.delete("/v1/recipe", headers=AUTH)
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert "allowed: GET, POST" in wrong.json()["error"]["message"]
    assert wrong.headers["allow"] == "GET, POST"


def test_a_form_body_is_refused_naming_the_content_type(client: TestClient) -> None:
    body = '{"deployer":"argocd","criteria":{"service":"eks","accelerator":"h100"}}'
    form = {**AUTH, "Content-Type": "application/x-www-form-urlencoded"}
    answer = client.post("/v1/bundle", content=body, headers=form)
    assert answer.status_code == 415
    error = answer.json()["error"]
    assert error["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert "application/json" in error["message"] and "application/x-www-form-urlencoded" in error["message"]
    as_json = client.post("/v1/bundle", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert as_json.status_code == 200 and as_json.headers["content-type"] == "application/zip"


def test_response_bodies_match_their_declared_models(client: TestClient) -> None:
    criteria = {"service": "eks", "accelerator": "h100"}
    recipe = client.get("/v1/recipe", params=criteria, headers=AUTH).json()
    assert msgspec.convert(recipe, schemas.RecipeDocument).kind == "Recipe"
    assert list(recipe) == [
        "apiVersion",
        "kind",
        "metadata",
        "constraints",
        "componentRefs",
        "certification",
        "deploymentOrder",
    ]
    answer = client.get("/v1/query", params={**criteria, "selector": "deploymentOrder"}, headers=AUTH).json()
    assert msgspec.convert(answer, schemas.QueryAnswer).value == recipe["deploymentOrder"]
