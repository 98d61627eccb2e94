"""Recipe criteria: the five environment dimensions (plus node count) a recipe is resolved for.

The table of dimensions and allowed values, and the parsing of user mappings against it, live
in `dsx.model.dimensions` and are re-exported here; this
module adds the `Criteria` value the engine and the API pass around.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from dsx.model.dimensions import (
    ANY,
    DIMENSION_ALIASES,
    DIMENSIONS,
    KEYS,
    NODES,
    canonical_key,
    describe,
    normalize_mapping,
    normalize_nodes,
    normalize_value,
    recipe_name,
)

__all__ = [
    "ANY",
    "DIMENSIONS",
    "DIMENSION_ALIASES",
    "KEYS",
    "NODES",
    "Criteria",
    "canonical_key",
    "describe",
    "normalize_mapping",
    "normalize_nodes",
    "normalize_value",
    "parse_criteria",
]


@dataclass(frozen=True)
class Criteria:
    """A normalized query: every dimension is an allowed lower-case value, `any` when unset."""

    service: str = ANY
    accelerator: str = ANY
    os: str = ANY
    intent: str = ANY
    platform: str = ANY
    nodes: int | None = None

    def value(self, dimension: str) -> str:
        result: str = getattr(self, dimension)
        return result

    def specified(self) -> dict[str, str]:
        """The dimensions that are not `any`, in table order."""
        return {d: self.value(d) for d in DIMENSIONS if self.value(d) != ANY}

    def to_dict(self) -> dict[str, Any]:
        """All five dimensions (and `nodes` when given), in table order."""
        out: dict[str, Any] = {d: self.value(d) for d in DIMENSIONS}
        if self.nodes is not None:
            out[NODES] = self.nodes
        return out

    def overridden_by(self, other: Mapping[str, Any]) -> Criteria:
        """A copy with the non-None entries of `other` (already normalized) taking precedence."""
        changes = {k: v for k, v in other.items() if v is not None}
        return replace(self, **changes)

    def name(self) -> str:
        """Recipe name: the specified values joined by `-`, or `any` when nothing is specified."""
        return recipe_name(self.to_dict())


def parse_criteria(raw: Mapping[str, object], *, source: str) -> Criteria:
    """A `Criteria` from a user mapping (flags, a config file or an API body)."""
    return Criteria().overridden_by(normalize_mapping(raw, source=source))
