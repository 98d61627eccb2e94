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


def gather(
    flags: Mapping[str, object | None], *, config_path: str | None = None, snapshot_path: str | None = None
) -> Gathered:
    """Criteria from the snapshot, then the config file, then the flags (None = flag not given)."""
    warnings: list[str] = []
    layers: list[dict[str, Any]] = []
    detected: dict[str, Any] = {}
    # the file readers load when a file is given: flags alone need none of them (CLI start-up)
    if snapshot_path:
        from dsx import serialization
        from dsx.model import aicr
        from dsx.recipes import snapshot_criteria

        document = serialization.load_mapping_file(snapshot_path)
        if aicr.is_aicr_snapshot(document):
            document = aicr.snapshot_from_aicr(document, source=str(snapshot_path)).to_dict()
        derived = snapshot_criteria.derive(document, source=str(snapshot_path))
        warnings.extend(derived.warnings)
        detected = derived.criteria
        layers.append(detected)
    if config_path:
        from dsx import serialization
        from dsx.model import aicr

        config = serialization.load_mapping_file(config_path)
        if aicr.is_aicr_criteria(config):
            config = aicr.criteria_mapping(config, source=str(config_path))
        layers.append(criteria_model.normalize_mapping(config, source=str(config_path)))
    from_flags = dimensions.normalize_flags(flags, source=COMMAND_LINE)
    for key, value in from_flags.items():
        if key in detected and detected[key] != value:
            warnings.append(f"--{key} {value} overrides {detected[key]} detected in {snapshot_path}")
    layers.append(from_flags)
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return Gathered(criteria=criteria_model.Criteria().overridden_by(merged), warnings=tuple(warnings))
