"""`dsx query` paths: read one value out of the hydrated recipe.

A path is dot-separated keys with list indexes: `components.gpu-operator.values.driver.version`,
`components.gpu-operator.values.tolerations[0].key`. A key that itself contains dots or brackets
is written quoted in brackets: `values.nodeSelector["nvidia.com/gpu.present"]`. A leading `.` is
optional and `.` (or an empty path) selects the whole document. A missing step is a NotFoundError
naming the deepest prefix that exists and what is available there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsx.errors import BadInputError, NotFoundError

if TYPE_CHECKING:
    from dsx.model.recipe import Recipe

_TOKEN = re.compile(
    r"""
    (?P<dot>\.)
    | \[(?P<index>-?\d+)\]
    | \[(?P<quote>["'])(?P<quoted>(?:\\.|(?!(?P=quote)).)*)(?P=quote)\]
    | (?P<key>[^.\[\]]+)
    """,
    re.VERBOSE | re.DOTALL,
)
"""One token of a path."""
_BARE_KEY = re.compile(r"[^.\[\]\"'\s]+")
"""A key written without brackets and quotes."""


@dataclass(frozen=True)
class Step:
    """One step of a path: a map key or a list index."""

    key: str | None = None
    index: int | None = None

    def render(self, first: bool) -> str:
        if self.index is not None:
            return f"[{self.index}]"
        assert self.key is not None
        if _BARE_KEY.fullmatch(self.key):
            return self.key if first else f".{self.key}"
        escaped = self.key.replace("\\", "\\\\").replace('"', '\\"')
        return f'["{escaped}"]'


def parse_path(path: str) -> list[Step]:
    """Steps of `path`; malformed paths (`a..b`, `a[x]`, an unclosed bracket) are bad input."""
    text = path.strip()
    if text in ("", "."):
        return []
    if text.startswith("."):
        text = text[1:]
    steps: list[Step] = []
    position = 0
    expect_key = True  # after a dot (or at the start) a key must follow
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise BadInputError(f"--selector: cannot parse {path!r} at position {position + 1}")
        if match.group("dot") is not None:
            if expect_key:
                raise BadInputError(f"--selector: empty key in {path!r} at position {position + 1}")
            expect_key = True
        elif match.group("index") is not None:
            if expect_key and steps:
                raise BadInputError(f"--selector: an index must follow a key in {path!r}")
            steps.append(Step(index=int(match.group("index"))))
            expect_key = False
        elif match.group("quoted") is not None:
            steps.append(Step(key=re.sub(r"\\(.)", r"\1", match.group("quoted"), flags=re.DOTALL)))
            expect_key = False
        else:
            if not expect_key:
                raise BadInputError(f"--selector: missing '.' before {match.group('key')!r} in {path!r}")
            steps.append(Step(key=match.group("key")))
            expect_key = False
        position = match.end()
    if expect_key:
        raise BadInputError(f"--selector: {path!r} ends with '.'")
    return steps


def render_path(steps: list[Step]) -> str:
    return "".join(s.render(i == 0) for i, s in enumerate(steps)) or "."


def select(document: Any, path: str) -> Any:
    """The value at `path` in `document`; NotFoundError names the deepest existing prefix."""
    steps = parse_path(path)
    current = document
    for depth, step in enumerate(steps):
        walked = steps[:depth]
        if step.index is not None:
            if not isinstance(current, list):
                raise NotFoundError(_missing(path, walked, current, "is not a list"))
            if not -len(current) <= step.index < len(current):
                raise NotFoundError(_missing(path, walked, current, f"has {len(current)} items"))
            current = current[step.index]
        else:
            if not isinstance(current, Mapping) or step.key not in current:
                raise NotFoundError(_missing(path, walked, current, None))
            current = current[step.key]
    return current


def _missing(path: str, walked: list[Step], here: Any, why: str | None) -> str:
    prefix = render_path(walked)
    if why is None:
        if isinstance(here, Mapping):
            keys = ", ".join(str(k) for k in list(here)[:20])
            why = f"has keys: {keys}" if keys else "is an empty map"
        else:
            why = f"is a {type(here).__name__}, not a map"
    return f"no value at {path!r}; deepest existing prefix {prefix!r} {why}"


def hydrated(recipe: Recipe | Mapping[str, Any]) -> dict[str, Any]:
    """The query document: the recipe (a `Recipe` or its document), plus `components` keyed by name."""
    document = dict(recipe) if isinstance(recipe, Mapping) else recipe.to_dict()
    document["components"] = {ref["name"]: ref for ref in document["componentRefs"]}
    return document


def scalar_text(value: Any) -> str | None:
    """Bare text for a scalar (`true`, `580.105.08`, `null`), None for maps and lists."""
    if isinstance(value, Mapping | list):
        return None
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
