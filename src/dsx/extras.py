"""Optional extras: which `pip install 'dsx[EXTRA]'` brings which third-party module.

The core (recipes, bundles, signing, lint) needs only the base dependencies; talking to a
cluster, a database, the REST API, NVML or torch needs an extra. When such an import fails,
the CLI and the API turn it into a `MissingExtraError` naming the extra and the command
that installs it, instead of an internal error. A test holds this table against the
`[project.optional-dependencies]` of pyproject.toml.
"""

from __future__ import annotations

from dsx.errors import MissingExtraError

EXTRA_OF_MODULE: dict[str, str] = {
    "lightkube": "kube",
    "httpx2": "kube",
    "cel_expr_python": "cel",
    "google": "cel",
    "psycopg": "store",
    "fastapi": "api",
    "prometheus_client": "api",
    "pynvml": "nvml",
    "torch": "collectives",
}
"""Top-level import name → the extra whose dependencies provide it."""


def extra_for(module_name: str | None) -> str | None:
    """The extra that provides `module_name` (any dotted path), or None for modules dsx does not make optional."""
    if not module_name:
        return None
    return EXTRA_OF_MODULE.get(module_name.split(".")[0])


def install_command(extra: str) -> str:
    return f"pip install 'dsx[{extra}]'"


def missing(error: ModuleNotFoundError, *, needed_by: str = "this command") -> MissingExtraError | None:
    """The dsx error for an import that failed because an extra is not installed, else None (a real bug)."""
    extra = extra_for(error.name)
    if extra is None:
        return None
    return MissingExtraError(
        f"{needed_by} needs the optional extra '{extra}' (module {error.name!r} is not installed); "
        f"install it with: {install_command(extra)}  (or 'dsx[all]' for every extra)",
        details={"extra": extra, "module": error.name or ""},
    )
