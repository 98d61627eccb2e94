"""Local references kept in a file, so repeated runs on one machine measure them once.

On an executor that calibrates (local CPU), every threshold compares with a reference: the
same workload shape run on no node in particular, twice, keeping the worse value. That costs
two runs per category and world size. A calibration file keeps the references of earlier
runs (demos, a test suite, a user iterating on a recipe); entries are keyed by category,
world size and a digest of the workload's local shape, so a changed sweep is measured afresh.
References describe one machine: the file names its host and is refused on another. The host's
name is given by the caller (the entry point asks `dsx.host.hostname`), so this module does no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError, allowed_values_message
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

KIND = "CertificationCalibration"


def shape_key(category: catalog.Category, world_size: int) -> str:
    """`nccl-all-reduce/8r/<digest of the local sweep or training shape>`."""
    sweep = category.local_sweep or category.sweep
    training = category.local_training
    shape: dict[str, Any] = {
        "workload": category.workload.value,
        "collective": category.collective.value if category.collective else None,
        "dataType": category.data_type,
        "sweep": asdict(sweep) if sweep is not None else None,
        "training": asdict(training) if training is not None else None,
    }
    return f"{category.name}/{world_size}r/{serialization.digest(shape).removeprefix('sha256:')[:12]}"


@dataclass
class Calibration:
    host: str
    """The machine the references were measured on."""
    references: dict[str, dict[model.Metric, float]] = field(default_factory=dict)

    def get(self, category: catalog.Category, world_size: int) -> dict[model.Metric, float] | None:
        found = self.references.get(shape_key(category, world_size))
        return dict(found) if found is not None else None

    def put(self, category: catalog.Category, world_size: int, values: Mapping[model.Metric, float]) -> None:
        self.references[shape_key(category, world_size)] = dict(sorted(values.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": model.API_VERSION,
            "kind": KIND,
            "host": self.host,
            "references": {
                key: {metric.value: value for metric, value in values.items()}
                for key, values in sorted(self.references.items())
            },
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str, this_host: str) -> Calibration:
        """The file's references; refused when they were measured on another host than `this_host`."""
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{source}: expected a mapping at the top level, got {type(raw).__name__}")
        if raw.get("kind") != KIND:
            raise BadInputError(f"{source}: kind must be {KIND}")
        host = raw.get("host")
        if host != this_host:
            raise BadInputError(
                f"{source}: measured on host {host!r}, this is {this_host!r}; references do not travel "
                "(delete the file to measure afresh)"
            )
        entries = raw.get("references", {})
        if not isinstance(entries, Mapping):
            raise BadInputError(f"{source}: references must be a mapping")
        references: dict[str, dict[model.Metric, float]] = {}
        for key, values in entries.items():
            if not isinstance(values, Mapping):
                raise BadInputError(f"{source}: references.{key} must map metric to a number")
            parsed: dict[model.Metric, float] = {}
            for metric, value in values.items():
                where = f"{source}: references.{key}.{metric}"
                try:
                    known = model.Metric(metric)
                except ValueError:
                    raise BadInputError(
                        allowed_values_message(f"{source}: references.{key}", "metric", metric, list(model.Metric))
                    ) from None
                # every metric is a rate, a time or a ratio: a negative or infinite reference would
                # let any measurement pass (or none), so only finite values of at least 0 are kept
                if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < math.inf:
                    raise BadInputError(f"{where}: expected a finite number of at least 0, got {value!r}")
                parsed[known] = float(value)
            references[str(key)] = parsed
        return cls(host=str(host), references=references)
