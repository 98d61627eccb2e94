"""The `fuzz` marked run is long: it is collected only when asked for (`-m fuzz`, `make fuzz`)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "fuzz" in (config.getoption("markexpr") or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("fuzz") is None]
    dropped = [item for item in items if item.get_closest_marker("fuzz") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = chosen
