"""Kubernetes client failures become dsx errors here, so no lightkube or httpx exception leaves dsx.kube.

The status code decides the class (the table in `dsx.errors`); the message keeps what the
apiserver said and names the action, so one line tells the user what was refused and why.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
from lightkube.core.exceptions import ApiError, ConfigError, LoadResourceError

from dsx import errors


def error_for_status(action: str, status_code: int, reason: str, message: str) -> errors.DsxError:
    """The dsx error for an HTTP status the apiserver answered with."""
    text = f"{action}: {message or reason or f'HTTP {status_code}'}"
    details: dict[str, object] = {"status": status_code, "reason": reason}
    if status_code == 401:
        return errors.UnauthorizedError(f"{text} (the credentials in the kubeconfig were rejected)", details=details)
    if status_code == 403:
        return errors.ForbiddenError(text, details=details)
    if status_code == 404:
        return errors.NotFoundError(text, details=details)
    if status_code in (409, 410):
        return errors.ConflictError(text, details=details)
    if status_code in (400, 422):
        return errors.BadInputError(text, details=details)
    if status_code == 413:
        return errors.PayloadTooLargeError(text, details=details)
    if status_code == 429:
        return errors.RateLimitedError(text, details=details)
    if status_code == 504:
        return errors.DeadlineExceededError(text, details=details)
    if status_code >= 500:
        return errors.UnavailableError(text, details=details)
    return errors.InternalError(f"{text} (unexpected HTTP {status_code})", details=details)


def status_of(exc: ApiError) -> tuple[int, str, str]:
    """(code, reason, message) of an ApiError, whether it came from a response or a watch ERROR event."""
    status = exc.status
    code = int(status.code or 0)
    if not code and exc.response is not None:
        code = exc.response.status_code
    return code, status.reason or "", status.message or ""


def translate(action: str, exc: BaseException, server: str = "") -> errors.DsxError | None:
    """The dsx error for a client-side exception, or None when it is not a Kubernetes client failure."""
    where = f" at {server}" if server else ""
    if isinstance(exc, ApiError):
        return error_for_status(action, *status_of(exc))
    if isinstance(exc, httpx2.HTTPStatusError):
        response = exc.response
        return error_for_status(action, response.status_code, response.reason_phrase, response.text.strip()[:200])
    if isinstance(exc, httpx2.ConnectTimeout | httpx2.ConnectError):
        return errors.UnavailableError(f"{action}: cannot reach the Kubernetes API{where}: {exc}")
    if isinstance(exc, httpx2.TimeoutException):
        return errors.DeadlineExceededError(f"{action}: the Kubernetes API{where} did not answer in time")
    if isinstance(exc, httpx2.TransportError):
        return errors.UnavailableError(f"{action}: connection to the Kubernetes API{where} failed: {exc}")
    if isinstance(exc, ConfigError):
        return errors.BadInputError(f"{action}: kubeconfig: {exc}")
    if isinstance(exc, LoadResourceError):
        return errors.NotFoundError(f"{action}: {exc}")
    if isinstance(exc, ssl.SSLError):  # building the client: a CA or client-certificate file that is no certificate
        return errors.BadInputError(f"{action}: TLS configuration: {exc}")
    return None


@contextmanager
def translated(action: str, server: str = "") -> Iterator[None]:
    """Run a block whose client exceptions are re-raised as dsx errors (the original is the cause)."""
    try:
        yield
    except errors.DsxError:
        raise
    except Exception as exc:
        mapped = translate(action, exc, server)
        if mapped is None:
            raise
        raise mapped from exc
