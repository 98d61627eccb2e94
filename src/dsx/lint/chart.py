"""What dsx knows about one chart at one version: its defaults, schema, the values its templates read.

`ChartData` and the text parsers that fill it (template refs, deprecation comments, refs and
subchart listings); the names of a chart directory's files. Reading a directory is an adapter's
job (`dsx.charts.directory`), as fetching a chart is (`dsx.charts.fetch`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsx import serialization

KeyPath = tuple[str, ...]
"""A values key path as segments: `("driver", "upgradePolicy", "maxParallelUpgrades")`."""

VALUES_FILE = "values.yaml"
SCHEMA_FILE = "values.schema.json"
CHART_FILE = "Chart.yaml"
REFS_FILE = "values-refs.txt"
SUBCHARTS_FILE = "subcharts.txt"
SUBCHART_DIR = "charts"
TEMPLATES_DIR = "templates"


@dataclass(frozen=True)
class Deprecation:
    """A note in the chart's own comments saying a key is deprecated or a no-op."""

    note: str
    replacement: KeyPath | None = None


@dataclass(frozen=True)
class ChartData:
    """Everything the lint needs from one chart version; `origin` says where it was read from."""

    name: str
    version: str
    defaults: dict[str, Any]
    values_refs: frozenset[KeyPath]
    schema: dict[str, Any] | None = None
    subcharts: tuple[str, ...] = ()
    subchart_data: Mapping[str, ChartData] = field(default_factory=dict)
    deprecations: Mapping[KeyPath, Deprecation] = field(default_factory=dict)
    origin: str = ""


def as_plain(chart: ChartData) -> dict[str, Any]:
    """`chart` as plain data (dicts, tuples, frozensets, text, numbers) for a `marshal` cache file."""
    return {
        "name": chart.name,
        "version": chart.version,
        "defaults": chart.defaults,
        "values_refs": chart.values_refs,
        "schema": chart.schema,
        "subcharts": chart.subcharts,
        "subchart_data": {key: as_plain(sub) for key, sub in chart.subchart_data.items()},
        "deprecations": {path: (d.note, d.replacement) for path, d in chart.deprecations.items()},
        "origin": chart.origin,
    }


def from_plain(data: dict[str, Any]) -> ChartData:
    """The `ChartData` that `as_plain` wrote."""
    return ChartData(
        name=data["name"],
        version=data["version"],
        defaults=data["defaults"],
        values_refs=data["values_refs"],
        schema=data["schema"],
        subcharts=data["subcharts"],
        subchart_data={key: from_plain(sub) for key, sub in data["subchart_data"].items()},
        deprecations={
            path: Deprecation(note, replacement) for path, (note, replacement) in data["deprecations"].items()
        },
        origin=data["origin"],
    )


def dotted(path: KeyPath) -> str:
    return ".".join(path)


def split_path(text: str) -> KeyPath:
    return tuple(part for part in text.strip().split(".") if part)


# `.Values.a.b`, `$.Values.a.b` and `index .Values "a-b" "c"` are the three ways templates read values.
_VALUES_DOT = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_VALUES_INDEX = re.compile(r"index\s+\$?\.Values((?:\s+\"[^\"]+\")+)")
_QUOTED = re.compile(r"\"([^\"]+)\"")


def values_refs_from_templates(texts: Iterable[str]) -> frozenset[KeyPath]:
    """The `.Values` paths a chart's templates read, found by scanning the template text."""
    refs: set[KeyPath] = set()
    for text in texts:
        for match in _VALUES_DOT.finditer(text):
            refs.add(split_path(match.group(1)))
        for match in _VALUES_INDEX.finditer(text):
            refs.add(tuple(_QUOTED.findall(match.group(1))))
    return frozenset(r for r in refs if r)


def parse_refs_text(text: str) -> frozenset[KeyPath]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(split_path(line) for line in lines if line)


def format_refs_text(refs: Iterable[KeyPath]) -> str:
    return "".join(f"{dotted(r)}\n" for r in sorted(refs))


def condition_refs(chart_yaml: Mapping[str, Any]) -> frozenset[KeyPath]:
    """The values paths Helm itself reads to switch dependencies on and off (`condition:`)."""
    refs: set[KeyPath] = set()
    for dep in chart_yaml.get("dependencies") or []:
        if isinstance(dep, Mapping) and isinstance(dep.get("condition"), str):
            refs |= {split_path(c) for c in dep["condition"].split(",") if c.strip()}
    return frozenset(refs)


def dependency_keys(chart_yaml: Mapping[str, Any]) -> dict[str, list[str]]:
    """Declared dependencies: chart name → the values keys it is installed under (alias, else name)."""
    keys: dict[str, list[str]] = {}
    for dep in chart_yaml.get("dependencies") or []:
        if isinstance(dep, Mapping) and isinstance(dep.get("name"), str) and dep["name"]:
            keys.setdefault(dep["name"], []).append(str(dep.get("alias") or dep["name"]))
    return keys


# --- deprecation notes in values.yaml comments ------------------------------------------------

_DEPRECATED_WORDS = re.compile(r"deprecat|\bno-?op\b|\bobsolete\b|\bno longer (?:used|supported|read)", re.I)
_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*|\"[^\"]+\"|'[^']+')\s*:(?:\s|$)")
_COMMENTED_KEY = re.compile(r"^(?P<indent>\s*)#\s*(?P<key>[A-Za-z_][A-Za-z0-9_-]*)\s*:")
_REPLACEMENT = re.compile(
    r"\b(?:use|using|replaced by|in favou?r of|superseded by)\s+`?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)`?", re.I
)


def deprecations_from_values_text(text: str, known: set[KeyPath]) -> dict[KeyPath, Deprecation]:
    """Keys whose comments in values.yaml call them deprecated or a no-op.

    Two shapes are recognised: a comment block right above a key (real or commented out) that
    names that key next to a deprecation word, and an inline comment after a key. The key's
    parent comes from indentation, as YAML reads it. `known` resolves a named replacement
    (`use kernelModuleType instead`) to a full path.
    """
    lines = text.splitlines()
    found: dict[KeyPath, Deprecation] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the real mapping keys enclosing a line
    block: list[str] = []  # the comment lines just above the current line
    for raw in lines:
        stripped = raw.strip()
        indent = len(raw) - len(raw.lstrip())
        if not stripped:
            block = []
            continue
        if stripped.startswith("#"):
            commented = _COMMENTED_KEY.match(raw)
            if commented and block:
                _note_from_block(found, block, _parent(stack, indent), commented.group("key"), known)
            block = [*block, stripped.lstrip("#").strip()]
            continue
        if stripped.startswith("-"):
            block = []
            continue
        key_line = _KEY_LINE.match(raw)
        if key_line is None:
            block = []
            continue
        key = key_line.group("key").strip("\"'")
        parent = _parent(stack, indent)
        if block:
            _note_from_block(found, block, parent, key, known)
        inline = raw[key_line.end() :]
        if " #" in inline:
            comment = inline.split(" #", 1)[1].strip()
            if _DEPRECATED_WORDS.search(comment):
                found[(*parent, key)] = Deprecation(comment, _replacement(comment, parent, known))
        block = []
        stack = [*_enclosing(stack, indent), (indent, key)]
    return found


def _enclosing(stack: list[tuple[int, str]], indent: int) -> list[tuple[int, str]]:
    return [(i, k) for i, k in stack if i < indent]


def _parent(stack: list[tuple[int, str]], indent: int) -> KeyPath:
    return tuple(k for _, k in _enclosing(stack, indent))


def _note_from_block(
    found: dict[KeyPath, Deprecation], block: list[str], parent: KeyPath, key: str, known: set[KeyPath]
) -> None:
    notes = [line for line in block if _DEPRECATED_WORDS.search(line)]
    if not notes:
        return  # most blocks: no pattern to compile for the key (a fresh process compiles each one)
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(key)}(?![A-Za-z0-9_])")
    if any(word.search(line) for line in notes):
        note = " ".join(notes)
        found[(*parent, key)] = Deprecation(note, _replacement(note, parent, known, exclude=key))


def _replacement(note: str, parent: KeyPath, known: set[KeyPath], exclude: str = "") -> KeyPath | None:
    for match in _REPLACEMENT.finditer(note):
        name = match.group("key").rstrip(".")
        if name == exclude:
            continue
        relative = (*parent, *split_path(name))
        if relative in known:
            return relative
        absolute = split_path(name)
        if absolute in known:
            return absolute
    return None


CHART_LIMITS = serialization.Limits(max_bytes=256 * 2**20, max_elements=20_000_000, duplicate_keys=True)
"""Repository indexes run to tens of MiB, and Helm reads a repeated values key as the last one."""


def parse_yaml_fast(text: str | bytes, *, source: str) -> Any:
    """Chart values and repository indexes through the safe loader, with room for their size."""
    return serialization.parse_yaml(text, source=source, limits=CHART_LIMITS)


def key_paths(values: Mapping[str, Any], prefix: KeyPath = ()) -> set[KeyPath]:
    """Every key path of a values tree, maps included (`a`, `a.b`, `a.b.c`)."""
    paths: set[KeyPath] = set()
    for key, value in values.items():
        path = (*prefix, str(key))
        paths.add(path)
        if isinstance(value, Mapping):
            paths |= key_paths(value, path)
    return paths
