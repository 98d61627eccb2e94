from __future__ import annotations

from fastapi.testclient import TestClient

from dsx.api import routes_certify

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CRITERIA = {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training", "platform": "kubeflow"}


def _snapshot(nodes: int) -> dict[str, object]:
    return {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Snapshot",
        "cluster": {"serverVersion": "v1.33.2", "provider": "aws"},
        "nodes": [
            {
                "name": f"gpu-{i}",
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
                "capacity": {"nvidia.com/gpu": "8"},
                "allocatable": {"nvidia.com/gpu": "8"},
                "nodeInfo": {"osImage": "Ubuntu 24.04.1 LTS", "kernelVersion": "6.8.0-1028-aws"},
            }
            for i in range(nodes)
        ],
    }


def test_validate_returns_a_ctrf_report(client: TestClient) -> None:
    recipe = client.post("/v1/recipe", json=CRITERIA, headers=AUTH).json()
    response = client.post(
        "/v1/validate", json={"recipe": recipe, "snapshot": _snapshot(2), "phases": ["readiness"]}, headers=AUTH
    )
    assert response.status_code == 200, response.text
    report = response.json()
    tests = report["results"]["tests"]
    assert tests, report
    assert {t["status"] for t in tests} <= {"passed", "failed", "skipped"}


def test_validate_rejects_a_malformed_recipe(client: TestClient) -> None:
    response = client.post("/v1/validate", json={"recipe": {"kind": "Nope"}, "snapshot": _snapshot(1)}, headers=AUTH)
    assert response.status_code == 400
    assert "recipe" in response.json()["error"]["message"]


def test_certification_runs_in_the_background_and_isolates_the_injected_node(client: TestClient) -> None:
    started = client.post(
        "/v1/certifications",
        json={"nodes": 4, "categories": ["nccl-all-reduce"], "inject": ["node-2:crash"]},
        headers=AUTH,
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    assert started.headers["location"] == f"/v1/certifications/{run_id}"
    busy = client.post("/v1/certifications", json={"nodes": 2}, headers=AUTH)
    assert busy.status_code == 409
    assert client.get(f"/v1/certifications/{run_id}/report", headers=AUTH).status_code in (200, 409)
    assert routes_certify.wait_idle(client.app.fastapi, timeout_seconds=300)  # type: ignore[attr-defined]
    status = client.get(f"/v1/certifications/{run_id}", headers=AUTH).json()
    assert status["status"] == "FAILED", status
    assert status["failedNodes"] == ["node-2"]
    report = client.get(f"/v1/certifications/{run_id}/report", headers=AUTH).json()
    assert report
    assert client.get("/v1/certifications/unknown", headers=AUTH).status_code == 404


def test_unknown_category_or_node_is_bad_input(client: TestClient) -> None:
    assert client.post("/v1/certifications", json={"categories": ["nope"]}, headers=AUTH).status_code in (400, 404)
    bad_node = client.post("/v1/certifications", json={"nodes": 2, "inject": ["node-9:slow"]}, headers=AUTH)
    assert bad_node.status_code == 400
