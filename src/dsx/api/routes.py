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
    import importlib
    import importlib.util

    full = f"dsx.api.{name}"
    if importlib.util.find_spec(full) is None:
        return None
    return importlib.import_module(full)
