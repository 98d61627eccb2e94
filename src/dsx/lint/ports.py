"""The lint's one port: a `ChartSource` answers a component's chart data, or says why it cannot.

The sources themselves (directories, the cache, the chart's repository over HTTP) are adapters
in `dsx.charts`; `dsx.charts.sources.default_source` builds the standard chain.
"""

from __future__ import annotations

from typing import Protocol

from dsx.errors import NotFoundError
from dsx.lint import chart as chart_data
from dsx.model.recipe import ComponentRef


class ChartUnavailable(NotFoundError):
    """No chart data for a component at its pinned version; the message is the reason.

    `looked` is the short part one source contributes when a chain joins every source's answer.
    """

    def __init__(self, message: str, *, looked: str = "") -> None:
        super().__init__(message)
        self.looked = looked or message


class ChartSource(Protocol):
    def chart_for(self, component: ComponentRef) -> chart_data.ChartData:
        """The chart the component installs, at its pinned version; ChartUnavailable otherwise."""
        ...


def chart_name(component: ComponentRef) -> str:
    return component.chart or component.name
