"""Where criteria come from: a snapshot, a config file and flags, in rising precedence.

Each source is validated on its own so an error names the file (or "command line") and the
field; the layers then merge key by key. A flag that overrides a value the snapshot detected is
reported as a warning, because it usually means someone is describing a cluster other than the
one the snapshot was taken from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsx.model import criteria as criteria_model
from dsx.model import dimensions

COMMAND_LINE = dimensions.COMMAND_LINE


@dataclass(frozen=True)
class Gathered:
    criteria: criteria_model.Criteria
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamedDocument:
    """A document's mapping and the file it came from (an entry point reads it: no I/O here)."""

    source: str
    data: Mapping[str, Any]


def gather(
    flags: Mapping[str, object | None], *, config: NamedDocument | None = None, snapshot: NamedDocument | None = None
) -> Gathered:
    """Criteria from the snapshot, then the config file, then the flags (None = flag not given)."""
    warnings: list[str] = []
    layers: list[dict[str, Any]] = []
    detected: dict[str, Any] = {}
    # the readers of a snapshot and of AICR's formats load when one is given: flags alone need none
    if snapshot is not None:
        from dsx.model import aicr
        from dsx.recipes import snapshot_criteria

        document: Mapping[str, Any] = snapshot.data
        if aicr.is_aicr_snapshot(document):
            document = aicr.snapshot_from_aicr(document, source=snapshot.source).to_dict()
        derived = snapshot_criteria.derive(document, source=snapshot.source)
        warnings.extend(derived.warnings)
        detected = derived.criteria
        layers.append(detected)
    if config is not None:
        from dsx.model import aicr

        values: Mapping[str, Any] = config.data
        if aicr.is_aicr_criteria(values):
            values = aicr.criteria_mapping(values, source=config.source)
        layers.append(criteria_model.normalize_mapping(values, source=config.source))
    from_flags = dimensions.normalize_flags(flags, source=COMMAND_LINE)
    for key, value in from_flags.items():
        if key in detected and detected[key] != value:
            where = snapshot.source if snapshot is not None else "the snapshot"
            warnings.append(f"--{key} {value} overrides {detected[key]} detected in {where}")
    layers.append(from_flags)
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return Gathered(criteria=criteria_model.Criteria().overridden_by(merged), warnings=tuple(warnings))
