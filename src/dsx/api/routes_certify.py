"""/v1/certifications: start a local certification in the background, poll it, fetch its report.

Certifications take minutes and real CPU, so the API runs one at a time (409 while one runs)
and keeps finished reports in memory for the life of the process.
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from fastapi import Depends, FastAPI, Path
from fastapi.responses import Response

from dsx.api import schemas, wire
from dsx.errors import BadInputError, ConflictError, DsxError, NotFoundError
from dsx.model import certification as model

if TYPE_CHECKING:
    from dsx.api.app import ApiSettings

log = logging.getLogger("dsx.api.certify")

MAX_NODES = 16
"""Upper bound for API-started local runs: each simulated node is a process on this host."""


class CertificationBody(schemas.Model, forbid_unknown_fields=True, kw_only=True):
    categories: Annotated[list[str], msgspec.Meta(min_length=1, max_length=8)] = msgspec.field(
        default_factory=lambda: ["nccl-all-reduce"]
    )
    nodes: Annotated[int, msgspec.Meta(ge=2, le=MAX_NODES)] = 4
    inject: Annotated[list[str], msgspec.Meta(max_length=4, examples=[["node-1:slow"]])] = msgspec.field(
        default_factory=list
    )


@dataclass
class _Run:
    id: str
    status: str = model.Result.RUNNING.value
    error: str | None = None
    report: dict[str, Any] | None = None
    failed_nodes: list[str] = field(default_factory=list)

    def view(self) -> schemas.CertificationStatus:
        return schemas.CertificationStatus(
            id=self.id, status=model.Result(self.status), error=self.error, failed_nodes=list(self.failed_nodes)
        )


@dataclass
class _Registry:
    runs: dict[str, _Run] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    active: threading.Thread | None = None


def _spec(body: CertificationBody) -> model.Certification:
    from dsx.model import certify_catalog as catalog

    for name in body.categories:
        catalog.get(name)
    injections = tuple(model.FaultInjection.parse(text) for text in body.inject)
    known = {f"node-{i}" for i in range(body.nodes)}
    unknown = [i.node for i in injections if i.node not in known]
    if unknown:
        raise BadInputError(f"inject: unknown node {unknown[0]!r}; nodes are node-0 … node-{body.nodes - 1}")
    return model.Certification(
        name="api",
        target=model.Target(node_count=body.nodes),
        categories=tuple(model.CategoryRequest(n) for n in body.categories),
        injections=injections,
    )


def _execute(run: _Run, spec: model.Certification) -> None:
    from datetime import UTC, datetime

    from dsx import host
    from dsx.certify import engine, reports
    from dsx.executors.local.executor import LocalExecutor

    try:
        assert spec.target.node_count is not None
        started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with LocalExecutor(spec.target.node_count, injections=spec.injections) as executor:
            result = engine.certify(spec, executor)
        cluster = f"local: {spec.target.node_count} simulated nodes on {host.hostname()}"
        run.report = reports.document(result, started_at=started_at, cluster=cluster)
        run.failed_nodes = list(result.failed_nodes)
        run.status = result.result.value
    except DsxError as exc:
        log.warning("certification %s incomplete: %s", run.id, exc)
        run.status, run.error = model.Result.INCOMPLETE.value, str(exc)
    except Exception as exc:  # the thread must record, not lose, what went wrong
        log.exception("certification %s failed with an internal error", run.id)  # the traceback, in the log
        run.status, run.error = model.Result.INCOMPLETE.value, f"internal error: {type(exc).__name__}: {exc}"


def register(api: FastAPI, settings: ApiSettings) -> None:
    registry = _Registry()
    api.state.certifications = registry

    @api.post(
        "/v1/certifications",
        tags=["certify"],
        status_code=202,
        responses={**wire.answers(schemas.CertificationStatus, 202), **schemas.errors(409)},
        openapi_extra=wire.request(CertificationBody),
    )
    def post_certification(body: Annotated[CertificationBody, Depends(wire.body(CertificationBody))]) -> Response:
        """Start a local certification (real collectives); 409 while another one runs."""
        spec = _spec(body)
        with registry.lock:
            if registry.active is not None and registry.active.is_alive():
                raise ConflictError("a certification is already running; poll it and retry")
            run = _Run(id=secrets.token_hex(8))
            registry.runs[run.id] = run
            registry.active = threading.Thread(target=_execute, args=(run, spec), name=f"certify-{run.id}", daemon=True)
            registry.active.start()
        return wire.respond(run.view(), status=202, headers={"location": f"/v1/certifications/{run.id}"})

    def _get(run_id: str) -> _Run:
        run = registry.runs.get(run_id)
        if run is None:
            raise NotFoundError(f"certification {run_id!r} not found")
        return run

    @api.get(
        "/v1/certifications/{run_id}",
        tags=["certify"],
        responses={**wire.answers(schemas.CertificationStatus), **schemas.errors(404)},
    )
    def get_certification(run_id: str = Path(max_length=64)) -> Response:
        """Status: RUNNING, PASSED, FAILED or INCOMPLETE, with the failed nodes."""
        return wire.respond(_get(run_id).view())

    @api.get(
        "/v1/certifications/{run_id}/report",
        tags=["certify"],
        responses={**wire.answers(schemas.CertificationReport), **schemas.errors(404, 409)},
    )
    def get_certification_report(run_id: str = Path(max_length=64)) -> Response:
        """The certification report document (as `dsx certify run --output` writes it)."""
        run = _get(run_id)
        if run.report is None:
            raise ConflictError(f"certification {run_id} has no report yet (status {run.status})")
        return wire.respond(run.report)


def wait_idle(api: FastAPI, timeout_seconds: float) -> bool:
    """Block until no certification runs (for shutdown and tests); False on timeout."""
    registry: _Registry | None = getattr(api.state, "certifications", None)
    if registry is None or registry.active is None:
        return True
    registry.active.join(timeout=timeout_seconds)
    return not registry.active.is_alive()
