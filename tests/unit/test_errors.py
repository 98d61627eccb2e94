from __future__ import annotations

import pytest

from dsx import errors


@pytest.mark.parametrize(
    ("cls", "exit_code", "status"),
    [
        (errors.CheckFailedError, 1, 422),
        (errors.BadInputError, 2, 400),
        (errors.CatalogError, 2, 400),
        (errors.UnsupportedMediaTypeError, 2, 415),
        (errors.NotFoundError, 3, 404),
        (errors.UnauthorizedError, 4, 401),
        (errors.ForbiddenError, 4, 403),
        (errors.DeadlineExceededError, 5, 504),
        (errors.UnavailableError, 6, 503),
        (errors.InternalError, 8, 500),
    ],
)
def test_table_maps_each_class(cls: type[errors.DsxError], exit_code: int, status: int) -> None:
    err = cls("boom")
    assert errors.exit_code_for(err) == exit_code
    assert errors.http_status_for(err) == status


def test_foreign_exceptions_are_internal() -> None:
    assert errors.exit_code_for(ValueError("x")) == 8
    assert errors.http_status_for(KeyError("x")) == 500


def test_allowed_values_message_lists_values() -> None:
    msg = errors.allowed_values_message("--accelerator", "accelerator", "h900", ["h100", "h200"])
    assert "h900" in msg and "h100, h200" in msg
