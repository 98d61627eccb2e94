"""The criteria table and its parsing: five environment dimensions (plus node count).

One table (`DIMENSIONS`) drives parsing, validation, error messages, the CLI flags' help
(`dsx.cli.recipe_cmd`) and the API's criteria fields (`dsx.api.routes_configure`), so a new
allowed value is a one-line change (tests/unit/recipes/test_criteria_table.py proves it).
Values are case-insensitive; `any` is the wildcard on both sides, and an overlay that leaves a
field out means the same as `any` (see docs/adr/0002).

`dsx.model.criteria` holds the `Criteria` value and re-exports all of this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsx.errors import BadInputError, allowed_values_message

ANY = "any"

# dimension → allowed values, `any` last; the order is the order of the recipe name.
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "service": ("eks", "gke", "aks", "oke", "openshift", "kind", ANY),
    "accelerator": ("h100", "h200", "b200", "gb200", "a100", "l40s", "rtx-pro-6000", ANY),
    "os": ("ubuntu", "rhel", "cos", "amazonlinux", ANY),
    "intent": ("training", "inference", ANY),
    "platform": ("kubeflow", "dynamo", "ray", "slurm", ANY),
}
# other spellings accepted for a dimension name
DIMENSION_ALIASES: dict[str, str] = {"gpu": "accelerator"}
NODES = "nodes"
KEYS: tuple[str, ...] = (*DIMENSIONS, NODES)


def describe(dimension: str) -> str:
    """The allowed values of `dimension` as help text lists them: `eks, gke, …, any`."""
    return ", ".join(DIMENSIONS[dimension])


def normalize_value(dimension: str, value: object, *, source: str) -> str:
    """Lower-case `value` and check it against the dimension's allowed values (exit 2 otherwise)."""
    allowed = DIMENSIONS[dimension]
    text = str(value).strip().lower() if value is not None else ""
    if text == "":
        return ANY
    if text not in allowed:
        raise BadInputError(allowed_values_message(source, dimension, value, allowed))
    return text


def normalize_nodes(value: object, *, source: str) -> int | None:
    """`nodes` is an integer ≥ 1; None or empty means not given."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise BadInputError(f"{source}: nodes: {value!r} is not an integer >= 1")
    try:
        count = int(str(value).strip())
    except ValueError as exc:
        raise BadInputError(f"{source}: nodes: {value!r} is not an integer >= 1") from exc
    if count < 1:
        raise BadInputError(f"{source}: nodes: {value!r} is not an integer >= 1")
    return count


def canonical_key(key: str, *, source: str) -> str:
    """Dimension name for a user-written key (`gpu` → `accelerator`); unknown keys exit 2."""
    lowered = key.strip().lower()
    lowered = DIMENSION_ALIASES.get(lowered, lowered)
    if lowered not in KEYS:
        allowed = (*KEYS, *DIMENSION_ALIASES)
        raise BadInputError(allowed_values_message(source, "criteria key", key, allowed))
    return lowered


def normalize_mapping(raw: Mapping[str, object], *, source: str) -> dict[str, Any]:
    """Validated, lower-cased criteria from a user mapping; only the keys present are returned."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        dimension = canonical_key(str(key), source=source)
        if dimension in out:
            raise BadInputError(f"{source}: {key}: {dimension} given twice")
        if dimension == NODES:
            out[NODES] = normalize_nodes(value, source=source)
        else:
            out[dimension] = normalize_value(dimension, value, source=source)
    return out


COMMAND_LINE = "command line"
"""The source named in errors about flags."""


def normalize_flags(flags: Mapping[str, object | None], *, source: str = COMMAND_LINE) -> dict[str, Any]:
    """Criteria flags as parsed (None or empty: not given), validated in table order like `normalize_mapping`."""
    return normalize_mapping({k: v for k, v in flags.items() if v is not None and v != ""}, source=source)


def recipe_name(criteria: Mapping[str, object]) -> str:
    """Recipe name: the specified values (not `any`) joined by `-` in table order, or `any`."""
    return "-".join(str(criteria[d]) for d in DIMENSIONS if criteria.get(d, ANY) != ANY) or ANY
