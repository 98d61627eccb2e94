"""Route registration: one module per area, each translating HTTP into domain calls."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from dsx.api.app import ApiSettings


def register(api: FastAPI, settings: ApiSettings) -> None:
    from dsx.api import routes_configure

    routes_configure.register(api)
    for optional in ("routes_validate", "routes_certify", "routes_sentinel"):
        module = _optional(optional)
        if module is not None:
            module.register(api, settings)


def check_ready(settings: ApiSettings) -> None:
    """Raise when a dependency the API needs is not usable; /readyz turns that into 503."""
    from dsx.recipes import catalog

    catalog.load()
    module = _optional("routes_sentinel")
    if module is not None and settings.store_url:
        module.check_ready(settings)


def _optional(name: str):  # type: ignore[no-untyped-def]
    """The route module, or None when an optional extra it needs (kube, store, cel …) is not installed.

    Its routes are then absent (404), and the server logs once which extra would add them.
    """
    import importlib
    import logging

    from dsx import extras

    try:
        return importlib.import_module(f"dsx.api.{name}")
    except ModuleNotFoundError as exc:
        missing = extras.missing(exc, needed_by=f"the API routes of dsx.api.{name}")
        if missing is None:
            raise
        logging.getLogger("dsx.api").warning("%s", missing)
        return None
