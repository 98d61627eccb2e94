"""One error tree for all of dsx, mapped to CLI exit codes and HTTP statuses in one table.

Every failure that reaches a user is a `DsxError`. Adapters translate foreign
exceptions (Kubernetes client, database driver, OS) into the most specific class
here, chaining the original as `__cause__`, so no third-party exception escapes a seam.

    DsxError                          exit  http
    ├── CheckFailedError                 1   422   a check ran and failed: validation, drift, tamper, certification
    ├── BadInputError                    2   400   malformed file, unknown flag value, schema violation
    │   ├── CatalogError                 2   400   the shipped catalog itself is inconsistent
    │   └── UnsupportedMediaTypeError    2   415   a request body in a content type the API does not read
    ├── NotFoundError                    3   404   a file, object, path or component does not exist
    │   └── MissingExtraError            3   501   an optional extra (pip install 'dsx[EXTRA]') is not installed
    ├── UnauthorizedError                4   401   no or bad credentials
    │   └── ForbiddenError               4   403   authenticated but not allowed (RBAC)
    ├── DeadlineExceededError            5   504   an operation ran past its timeout
    ├── UnavailableError                 6   503   a dependency (cluster, database) cannot be reached
    │   └── ConflictError                6   409   a concurrent change won; retry
    ├── PayloadTooLargeError             2   413   a request body over the limit
    ├── RateLimitedError                 6   429   too many requests; retry after a delay
    └── InternalError                    8   500   a bug in dsx

Messages name the file, the field and the allowed values where they apply: the
CLI prints `str(error)` as one line.
"""

from __future__ import annotations

from collections.abc import Iterable


class Outcome:
    """The row of the table: what a caller does with an error class.

    A plain class, not a dataclass: this module loads with every command, and `dataclasses`
    costs `dsx recipe` the `inspect` module at start-up (docs/cli-startup.md).
    """

    __slots__ = ("code", "exit_code", "http_status")

    def __init__(self, code: str, exit_code: int, http_status: int) -> None:
        self.code = code
        self.exit_code = exit_code
        self.http_status = http_status

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return (self.code, self.exit_code, self.http_status) == (other.code, other.exit_code, other.http_status)

    def __hash__(self) -> int:
        return hash((self.code, self.exit_code, self.http_status))

    def __repr__(self) -> str:
        return f"Outcome(code={self.code!r}, exit_code={self.exit_code}, http_status={self.http_status})"


class DsxError(Exception):
    """Base of every dsx error. Carries an optional `details` mapping for reports and APIs."""

    outcome = Outcome("INTERNAL", 8, 500)

    def __init__(self, message: str, *, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    @property
    def http_status(self) -> int:
        return self.outcome.http_status

    @property
    def code(self) -> str:
        return self.outcome.code


class CheckFailedError(DsxError):
    """A check ran to completion and its verdict is negative."""

    outcome = Outcome("CHECK_FAILED", 1, 422)


class BadInputError(DsxError):
    """The input is malformed or names a value outside the allowed set."""

    outcome = Outcome("INVALID_REQUEST", 2, 400)


class CatalogError(BadInputError):
    """The catalog (overlays, components, rules) breaks one of its invariants."""

    outcome = Outcome("INVALID_CATALOG", 2, 400)


class UnsupportedMediaTypeError(BadInputError):
    """A request body came in a content type other than the one the endpoint reads."""

    outcome = Outcome("UNSUPPORTED_MEDIA_TYPE", 2, 415)


class NotFoundError(DsxError):
    """The named thing does not exist."""

    outcome = Outcome("NOT_FOUND", 3, 404)


class MissingExtraError(NotFoundError):
    """A feature needs an optional extra that is not installed; the message names the pip command."""

    outcome = Outcome("MISSING_EXTRA", 3, 501)


class UnauthorizedError(DsxError):
    """Credentials are missing or were rejected."""

    outcome = Outcome("UNAUTHORIZED", 4, 401)


class ForbiddenError(UnauthorizedError):
    """Credentials are valid but the action is not permitted."""

    outcome = Outcome("FORBIDDEN", 4, 403)


class DeadlineExceededError(DsxError):
    """An operation did not finish within its timeout."""

    outcome = Outcome("TIMEOUT", 5, 504)


class UnavailableError(DsxError):
    """A dependency cannot be reached; retrying later may help."""

    outcome = Outcome("UNAVAILABLE", 6, 503)


class ConflictError(UnavailableError):
    """A concurrent writer changed the object first; re-read and retry."""

    outcome = Outcome("CONFLICT", 6, 409)


class PayloadTooLargeError(DsxError):
    """A request body is larger than the configured limit."""

    outcome = Outcome("PAYLOAD_TOO_LARGE", 2, 413)


class RateLimitedError(DsxError):
    """Too many requests; the caller should back off."""

    outcome = Outcome("RATE_LIMITED", 6, 429)


class InternalError(DsxError):
    """A defect in dsx: the message asks for a bug report."""

    outcome = Outcome("INTERNAL", 8, 500)


def allowed_values_message(source: str, field: str, value: object, allowed: Iterable[object]) -> str:
    """The one wording for 'value not allowed' so every command reads the same."""
    listed = ", ".join(str(a) for a in allowed)
    return f"{source}: {field}: {value!r} is not allowed; allowed values: {listed}"


def exit_code_for(error: BaseException) -> int:
    """Exit code of any exception: dsx errors by the table, everything else is internal."""
    if isinstance(error, DsxError):
        return error.exit_code
    return InternalError.outcome.exit_code


def http_status_for(error: BaseException) -> int:
    """HTTP status of any exception, by the same table."""
    if isinstance(error, DsxError):
        return error.http_status
    return InternalError.outcome.http_status
