"""Area of concern: a certification thread that fails with an unexpected error records the whole
error — its message in the run, its traceback in the log — not just the exception's type name."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dsx.api import routes_certify
from dsx.certify import engine
from dsx.executors.local import executor


class _NoProcesses:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _NoProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_an_internal_error_is_recorded_with_message_and_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(*args: Any, **kwargs: Any) -> None:
        raise KeyError("rank 3 never reported its bus bandwidth")

    monkeypatch.setattr(executor, "LocalExecutor", _NoProcesses)
    monkeypatch.setattr(engine, "certify", explode)
    run = routes_certify._Run(id="abc123")
    spec = routes_certify._spec(routes_certify.CertificationBody(nodes=2))
    with caplog.at_level(logging.ERROR, logger="dsx.api.certify"):
        routes_certify._execute(run, spec)
    assert run.status == "INCOMPLETE"
    assert run.error == "internal error: KeyError: 'rank 3 never reported its bus bandwidth'"
    (record,) = [r for r in caplog.records if r.name == "dsx.api.certify"]
    assert "abc123" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "explode" in caplog.text, "the traceback names the failing frame"
