"""Lint recipe values against the charts they target, so keys Helm would silently ignore fail early.

`lint_recipe(recipe, chart_source)` is the entry point (used by `dsx lint`, `dsx bundle` and the
catalog tests); the chart sources are adapters: `dsx.charts.sources.default_source()` builds the
standard chart lookup chain.
"""

from __future__ import annotations

from dsx.lint.check import lint_recipe
from dsx.lint.ports import ChartSource, ChartUnavailable
from dsx.lint.report import Finding, FindingKind, LintReport, NotLinted

__all__ = [
    "ChartSource",
    "ChartUnavailable",
    "Finding",
    "FindingKind",
    "LintReport",
    "NotLinted",
    "lint_recipe",
]
