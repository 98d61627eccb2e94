"""Click parameter types shared by commands, for numbers that must stay in range.

`click.FloatRange` lets `nan` through every bound (all comparisons with it are false) and
`inf` through any open upper bound; both then fail deep inside a command as an internal error.
"""

from __future__ import annotations

import math
from typing import Any

import click

INT64_MAX = 2**63 - 1
"""The largest integer a store column (SQLite and PostgreSQL BIGINT) holds."""


class FiniteFloatRange(click.FloatRange):
    """A `FloatRange` that also refuses `nan` and `inf`."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def log_format_option(command: Any) -> Any:
    """`--log-format json|text` of every long-running command; `dsx.logs.configure` applies it."""
    return click.option(
        "--log-format",
        type=click.Choice(["json", "text"]),
        default="json",
        show_default=True,
        help="Log lines on stderr: one JSON object each (for log collectors), or text for a terminal.",
    )(command)
