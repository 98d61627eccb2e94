"""Merge rules for overlays, one function per rule so each is stated once and tested alone.

The rules (also in src/dsx/catalog/README.md):
- values: maps deep-merge, the later layer wins; lists and scalars are replaced whole;
  an explicit `null` is kept (Helm then drops the chart default for that key).
- component scalars (type, chart, source, path, namespace, version): a later non-empty value wins.
- dependencyRefs, healthCheckAsserts: replaced whole when a later layer sets them.
- manifests: merged by file name, the later file wins.
- constraints: keyed by (name, operator), the later one wins.
- certification: categories are a union in first-seen order; thresholds deep-merge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def copy_tree(value: Any) -> Any:
    """A deep copy of plain YAML data (dicts, lists, scalars); much faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_tree(v) for v in value]
    return value


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """A new map: `overlay` onto `base`. Maps merge recursively; anything else in `overlay` replaces.

    Neither input is modified and the result shares no containers with them.
    """
    merged = {k: copy_tree(v) for k, v in base.items()}
    merge_into(merged, overlay)
    return merged


def merge_into(target: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    """In-place form of `deep_merge` for a `target` the caller owns."""
    for key, value in overlay.items():
        current = target.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merge_into(current, value)
        else:
            target[key] = copy_tree(value)


def union_in_order(first: list[str], second: list[str]) -> list[str]:
    """Items of both lists, each once, in first-seen order."""
    return list(dict.fromkeys([*first, *second]))
