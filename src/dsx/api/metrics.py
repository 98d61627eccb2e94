"""Prometheus metrics of the API process: requests by route and status."""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest


def mount(api: FastAPI) -> None:
    registry = CollectorRegistry()
    requests = Counter("dsx_api_requests_total", "API requests", ["route", "status"], registry=registry)
    latency = Histogram("dsx_api_request_seconds", "API request latency", ["route"], registry=registry)
    api.state.metrics_registry = registry

    @api.middleware("http")
    async def _count(request: Request, call_next: Any) -> Any:
        started = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        requests.labels(route, str(response.status_code)).inc()
        latency.labels(route).observe(time.perf_counter() - started)
        return response

    @api.get(
        "/metrics",
        tags=["health"],
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
    )
    def metrics() -> Response:
        """Prometheus exposition format."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
