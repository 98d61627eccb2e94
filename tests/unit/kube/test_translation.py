"""Area of concern: Kubernetes client failures become the dsx error (and exit code) the table promises."""

from __future__ import annotations

import httpx2
import pytest
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.models.meta_v1 import Status

from dsx import errors
from dsx.kube import translation


@pytest.mark.parametrize(
    ("status", "error", "exit_code"),
    [
        (401, errors.UnauthorizedError, 4),
        (403, errors.ForbiddenError, 4),
        (404, errors.NotFoundError, 3),
        (409, errors.ConflictError, 6),
        (410, errors.ConflictError, 6),
        (422, errors.BadInputError, 2),
        (429, errors.RateLimitedError, 6),
        (500, errors.UnavailableError, 6),
        (503, errors.UnavailableError, 6),
        (504, errors.DeadlineExceededError, 5),
    ],
)
def test_status_codes_map_to_the_error_table(status: int, error: type[errors.DsxError], exit_code: int) -> None:
    mapped = translation.error_for_status("cordon node n1", status, "Reason", "what the server said")
    assert type(mapped) is error
    assert mapped.exit_code == exit_code
    assert str(mapped).startswith("cordon node n1: what the server said")


def test_api_errors_keep_the_server_message() -> None:
    exc = ApiError(status=Status(code=403, reason="Forbidden", message='nodes "n1" is forbidden'))
    mapped = translation.translate("patch node n1", exc)
    assert isinstance(mapped, errors.ForbiddenError)
    assert str(mapped) == 'patch node n1: nodes "n1" is forbidden'


def test_transport_failures() -> None:
    request = httpx2.Request("GET", "https://127.0.0.1:1/api")
    refused = translation.translate("list nodes", httpx2.ConnectError("refused", request=request), "https://x")
    assert isinstance(refused, errors.UnavailableError)
    assert "cannot reach the Kubernetes API at https://x" in str(refused)
    slow = translation.translate("list nodes", httpx2.ReadTimeout("slow", request=request))
    assert isinstance(slow, errors.DeadlineExceededError)
    assert isinstance(translation.translate("load", ConfigError("bad context")), errors.BadInputError)
    assert translation.translate("x", KeyError("not ours")) is None


def test_translated_re_raises_with_the_cause() -> None:
    request = httpx2.Request("GET", "https://127.0.0.1:1/api")
    with pytest.raises(errors.UnavailableError) as raised, translation.translated("list pods"):
        raise httpx2.ConnectError("refused", request=request)
    assert isinstance(raised.value.__cause__, httpx2.ConnectError)
    with pytest.raises(KeyError), translation.translated("list pods"):
        raise KeyError("a bug stays a bug")
