"""Certification categories as data: load, validate and look up `dsx/catalog/certification/*.yaml`.

A category names the workload (a collective or a training job), its default message-size
sweep for clusters and for local CPU runs, and its thresholds. Loading compiles every CEL
expression, so a broken catalog fails at load time with the file and field named.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsx import catalog, cel, serialization
from dsx.errors import CatalogError, NotFoundError, allowed_values_message
from dsx.model import certification as model

KIND = "CertificationCategory"
PLATFORM_KIND = "CertificationPlatform"
CEL_VARIABLES = ("value", "reference")
"""`value`: the measured metric; `reference`: the calibrated value of the same run shape (local)."""


@dataclass(frozen=True)
class Sweep:
    """nccl-tests -b/-e/-f/-n/-w."""

    min_bytes: int
    max_bytes: int
    step_factor: int
    iterations: int
    warmup_iterations: int

    def sizes(self) -> list[int]:
        sizes, size = [], self.min_bytes
        while size <= self.max_bytes:
            sizes.append(size)
            size *= self.step_factor
        return sizes


@dataclass(frozen=True)
class TrainingShape:
    steps: int
    warmup_steps: int
    log_interval: int = 1
    hidden_size: int = 256
    layers: int = 3
    micro_batch_size: int = 16


@dataclass(frozen=True)
class ThresholdRule:
    """One threshold and where it applies; empty match fields match anything."""

    metric: model.Metric
    expression: str
    source: str
    accelerator: str = ""
    interconnect: str = ""
    scale: model.Scale | None = None

    def matches(self, accelerator: str, interconnect: str, scale: model.Scale) -> bool:
        return (
            (not self.accelerator or self.accelerator == accelerator)
            and (not self.interconnect or self.interconnect == interconnect)
            and (self.scale is None or self.scale == scale)
        )

    @property
    def specificity(self) -> int:
        return sum(1 for f in (self.accelerator, self.interconnect, self.scale) if f)


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    workload: model.WorkloadKind
    scale: model.Scale
    min_nodes: int
    thresholds: tuple[ThresholdRule, ...]
    local_thresholds: tuple[ThresholdRule, ...]
    collective: model.Collective | None = None
    binary: str = ""
    data_type: str = "float"
    sweep: Sweep | None = None
    local_sweep: Sweep | None = None
    training: TrainingShape | None = None
    local_training: TrainingShape | None = None
    source: str = ""


@dataclass(frozen=True)
class Platform:
    """How a cluster's pods reach the GPU fabric: devices to request, variables to set."""

    name: str
    description: str
    interconnect: str
    detect_resource: str  # nodes allocating this resource use this platform; "" = the fallback
    request_all_of: tuple[str, ...]  # resources requested in full (the node's allocatable count)
    capabilities: tuple[str, ...]
    env: Mapping[str, str]
    source: str


def load_file(path: Path) -> Category:
    raw = serialization.load_mapping_file(str(path))
    where = path.name
    _expect(raw.get("apiVersion") == model.API_VERSION, where, f"apiVersion must be {model.API_VERSION}")
    _expect(raw.get("kind") == KIND, where, f"kind must be {KIND}")
    metadata = _mapping(raw.get("metadata"), f"{where}: metadata")
    spec = _mapping(raw.get("spec"), f"{where}: spec")
    name = metadata.get("name")
    _expect(isinstance(name, str) and name == path.stem, where, "metadata.name must equal the file name")
    workload = _enum(model.WorkloadKind, spec.get("workload"), where, "spec.workload")
    category = Category(
        name=str(name),
        description=str(metadata.get("description", "")),
        workload=workload,
        scale=_enum(model.Scale, spec.get("scale"), where, "spec.scale"),
        min_nodes=_integer(spec, "minNodes", 2, f"{where}: spec"),
        thresholds=tuple(_rules(spec.get("thresholds", []), f"{where}: spec.thresholds")),
        local_thresholds=tuple(_rules(spec.get("localThresholds", []), f"{where}: spec.localThresholds")),
        source=str(path),
    )
    if workload is model.WorkloadKind.COLLECTIVE:
        return _replace(
            category,
            collective=_enum(model.Collective, spec.get("collective"), where, "spec.collective"),
            binary=str(spec.get("binary", "")),
            data_type=str(spec.get("dataType", "float")),
            sweep=_sweep(spec.get("sweep"), f"{where}: spec.sweep"),
            local_sweep=_sweep(spec.get("localSweep"), f"{where}: spec.localSweep"),
        )
    return _replace(
        category,
        training=_training(spec.get("training"), f"{where}: spec.training"),
        local_training=_training(spec.get("localTraining"), f"{where}: spec.localTraining"),
    )


@functools.lru_cache(maxsize=1)
def load_all() -> dict[str, Category]:
    """Every shipped category by name, in name order."""
    directory = catalog.path("certification")
    return {c.name: c for c in (load_file(p) for p in sorted(directory.glob("*.yaml")))}


@functools.lru_cache(maxsize=1)
def platforms() -> dict[str, Platform]:
    """Every shipped platform (`platforms/*.yaml`) by name, in name order."""
    directory = catalog.path("certification") / "platforms"
    return {p.name: p for p in (load_platform(f) for f in sorted(directory.glob("*.yaml")))}


def load_platform(path: Path) -> Platform:
    raw = serialization.load_mapping_file(str(path))
    where = f"platforms/{path.name}"
    _expect(raw.get("kind") == PLATFORM_KIND, where, f"kind must be {PLATFORM_KIND}")
    metadata = _mapping(raw.get("metadata"), f"{where}: metadata")
    spec = _mapping(raw.get("spec"), f"{where}: spec")
    _expect(metadata.get("name") == path.stem, where, "metadata.name must equal the file name")
    env = _mapping(spec.get("env", {}), f"{where}: spec.env")
    _expect(all(isinstance(v, str) for v in env.values()), where, "spec.env values must be strings")
    _expect(bool(spec.get("source")), where, "spec.source must say where the settings come from")
    return Platform(
        name=path.stem,
        description=str(metadata.get("description", "")),
        interconnect=str(spec.get("interconnect", path.stem)).lower(),
        detect_resource=str(spec.get("detectResource", "")),
        request_all_of=tuple(str(r) for r in spec.get("requestAllOf", [])),
        capabilities=tuple(str(c) for c in spec.get("capabilities", [])),
        env=dict(sorted((str(k), str(v)) for k, v in env.items())),
        source=str(spec["source"]),
    )


def names() -> list[str]:
    return list(load_all())


def get(name: str) -> Category:
    categories = load_all()
    if name not in categories:
        raise NotFoundError(allowed_values_message("categories", "category", name, list(categories)))
    return categories[name]


def _replace(category: Category, **changes: Any) -> Category:
    from dataclasses import replace

    return replace(category, **changes)


def _rules(raw: Any, where: str) -> list[ThresholdRule]:
    if not isinstance(raw, list):
        raise CatalogError(f"{where}: must be a list")
    rules = []
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        entry = _mapping(entry, at)
        expression = entry.get("expression")
        _expect(isinstance(expression, str), at, "expression must be a CEL string")
        _expect(bool(entry.get("source")), at, "source must say where the figure comes from")
        cel.compile_expression(str(expression), CEL_VARIABLES, origin=f"{at}.expression")
        scale = entry.get("scale")
        rules.append(
            ThresholdRule(
                metric=_enum(model.Metric, entry.get("metric"), at, "metric"),
                expression=str(expression),
                source=str(entry["source"]),
                accelerator=str(entry.get("accelerator", "")).lower(),
                interconnect=str(entry.get("interconnect", "")).lower(),
                scale=None if scale is None else _enum(model.Scale, scale, at, "scale"),
            )
        )
    return rules


def _sweep(raw: Any, where: str) -> Sweep:
    entry = _mapping(raw, where)
    sweep = Sweep(
        min_bytes=model.parse_bytes(entry.get("minBytes"), f"{where}.minBytes"),
        max_bytes=model.parse_bytes(entry.get("maxBytes"), f"{where}.maxBytes"),
        step_factor=_integer(entry, "stepFactor", 2, where),
        iterations=_integer(entry, "iterations", 20, where),
        warmup_iterations=_integer(entry, "warmupIterations", 5, where),
    )
    _expect(sweep.min_bytes <= sweep.max_bytes, where, "minBytes must not exceed maxBytes")
    _expect(sweep.step_factor >= 2 and sweep.iterations >= 1, where, "stepFactor ≥ 2 and iterations ≥ 1")
    return sweep


def _training(raw: Any, where: str) -> TrainingShape:
    entry = _mapping(raw, where)
    shape = TrainingShape(
        steps=_integer(entry, "steps", 0, where),
        warmup_steps=_integer(entry, "warmupSteps", 0, where),
        log_interval=_integer(entry, "logInterval", 1, where),
        hidden_size=_integer(entry, "hiddenSize", 256, where),
        layers=_integer(entry, "layers", 3, where),
        micro_batch_size=_integer(entry, "microBatchSize", 16, where),
    )
    _expect(shape.steps > shape.warmup_steps >= 0, where, "steps must exceed warmupSteps")
    return shape


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: must be a mapping")
    return raw


def _enum(kind: Any, value: Any, where: str, field: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise CatalogError(allowed_values_message(where, field, value, [k.value for k in kind])) from None


def _integer(entry: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = entry.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise CatalogError(f"{where}.{key}: expected an integer, got {value!r}")
    return value


def _expect(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise CatalogError(f"{where}: {message}")
