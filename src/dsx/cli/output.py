"""Output formats shared by every read command: `--format yaml|json|table` and `-o FILE`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from dsx import atomic, serialization
from dsx.errors import BadInputError

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("yaml", "json", "table")


def format_options(func: F) -> F:
    """Add `--format` and `-o/--output` to a command."""
    return format_options_for(FORMATS)(func)


def format_options_for(formats: Sequence[str]) -> Callable[[F], F]:
    """`format_options` with the command's own choice of formats (the first one is the default)."""

    def decorate(func: F) -> F:
        func = click.option(
            "-o",
            "--output",
            "output",
            type=click.Path(dir_okay=False),
            default=None,
            help="Write to FILE instead of stdout.",
        )(func)
        func = click.option(
            "--format",
            "fmt",
            type=click.Choice(formats, case_sensitive=False),
            default=formats[0],
            show_default=True,
            help="Output format.",
        )(func)
        return func

    return decorate


def render(data: Any, fmt: str, table: Callable[[Any], str] | None = None) -> str:
    """Text of `data` in the chosen format; `table` renders the table form when given."""
    fmt = fmt.lower()
    if fmt == "json":
        return serialization.dump_json(data)
    if fmt == "table":
        return table(data) if table else generic_table(data)
    return serialization.dump_yaml(data)


def write(text: str, output: str | None) -> None:
    """Write to a file (atomically) or stdout.

    A file is replaced, never written through (a link at the name is replaced too); a device or
    pipe that exists at the name (`/dev/stdout`, a FIFO) is streamed into, as there is nothing to
    replace, and replacing `/dev/stdout` itself would break the system for everyone.
    """
    if output in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(str(output))
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            with open(path, "w", encoding="utf-8") as stream:
                stream.write(text)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_file(path, text)
    except OSError as exc:
        raise BadInputError(f"{path}: cannot write: {exc.strerror}") from exc


def emit(data: Any, fmt: str, output: str | None, table: Callable[[Any], str] | None = None) -> None:
    write(render(data, fmt, table), output)


def emit_selected(value: Any, fmt: str, output: str | None) -> None:
    """What `dsx query` prints: a scalar bare (`580.105.08`, `true`), a map or list in `fmt`."""
    from dsx.recipes.selector import scalar_text

    text = scalar_text(value)
    if text is not None:
        write(text + "\n", output)
    else:
        emit(value, fmt, output)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table (no colours, so it is stable in logs and tests)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def generic_table(data: Any) -> str:
    """Fallback table: a list of mappings becomes rows; a mapping becomes key/value rows."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        headers = list(dict.fromkeys(k for r in data for k in r))
        return format_table(headers, [[_cell(r.get(h)) for h in headers] for r in data])
    if isinstance(data, dict):
        return format_table(["key", "value"], [[k, _cell(v)] for k, v in data.items()])
    if isinstance(data, list):
        return "".join(f"{_cell(item)}\n" for item in data)
    return f"{_cell(data)}\n"


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict | list):
        return serialization.dump_json(value).replace("\n", " ").replace("  ", "")
    return "" if value is None else str(value)
