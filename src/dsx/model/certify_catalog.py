"""Certification categories as data: load, validate and look up `dsx/catalog/certification/*.yaml`.

A category names the workload (a collective or a training job), its default message-size
sweep for clusters and for local CPU runs, and its thresholds. The files are decoded by msgspec
schemas (`dsx.model.schema`); loading compiles every CEL expression, so a broken catalog fails at
load time with the file, the field and the allowed values named.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec

from dsx import catalog, cel, serialization
from dsx.errors import CatalogError, NotFoundError, allowed_values_message
from dsx.model import certification as model
from dsx.model import schema

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


# -- the documents: msgspec schemas (dsx.model.schema names file, field path and allowed values);
# what a schema cannot say (CEL that compiles, sizes like 16G, one field against another) follows.


class _Spec(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A spec section: camelCase keys, unknown keys refused with the allowed ones listed."""


class _Metadata(msgspec.Struct, frozen=True, kw_only=True):
    name: str | None = None
    description: str = ""


class _RuleDoc(_Spec, frozen=True, kw_only=True):
    metric: model.Metric
    expression: str
    source: Annotated[str, msgspec.Meta(min_length=1)]
    accelerator: str = ""
    interconnect: str = ""
    scale: model.Scale | None = None


class _SweepDoc(_Spec, frozen=True, kw_only=True):
    min_bytes: int | str
    max_bytes: int | str
    step_factor: int = 2
    iterations: int = 20
    warmup_iterations: int = 5


class _TrainingDoc(_Spec, frozen=True, kw_only=True):
    steps: int = 0
    warmup_steps: int = 0
    log_interval: int = 1
    hidden_size: int = 256
    layers: int = 3
    micro_batch_size: int = 16


class _CategorySpec(_Spec, frozen=True, kw_only=True):
    workload: model.WorkloadKind
    scale: model.Scale
    min_nodes: int = 2
    thresholds: list[_RuleDoc] = []
    local_thresholds: list[_RuleDoc] = []
    collective: model.Collective | None = None
    binary: str = ""
    data_type: str = "float"
    sweep: _SweepDoc | None = None
    local_sweep: _SweepDoc | None = None
    training: _TrainingDoc | None = None
    local_training: _TrainingDoc | None = None


class _CategoryDoc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    api_version: str
    kind: str
    metadata: _Metadata
    spec: _CategorySpec


class _PlatformSpec(_Spec, frozen=True, kw_only=True):
    interconnect: str | None = None
    detect_resource: str = ""
    request_all_of: list[str] = []
    capabilities: list[str] = []
    env: dict[str, str] = {}
    source: Annotated[str, msgspec.Meta(min_length=1)]


class _PlatformDoc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    kind: str
    metadata: _Metadata
    spec: _PlatformSpec


def load_file(path: Path) -> Category:
    raw = serialization.load_mapping_file(str(path))
    where = path.name
    _expect(raw.get("apiVersion") == model.API_VERSION, where, f"apiVersion must be {model.API_VERSION}")
    _expect(raw.get("kind") == KIND, where, f"kind must be {KIND}")
    doc = schema.decode(raw, _CategoryDoc, source=where, separator=": ", error=CatalogError)
    _expect(doc.metadata.name == path.stem, where, "metadata.name must equal the file name")
    spec = doc.spec
    category = Category(
        name=path.stem,
        description=doc.metadata.description,
        workload=spec.workload,
        scale=spec.scale,
        min_nodes=spec.min_nodes,
        thresholds=tuple(_rules(spec.thresholds, f"{where}: spec.thresholds")),
        local_thresholds=tuple(_rules(spec.local_thresholds, f"{where}: spec.localThresholds")),
        source=str(path),
    )
    if spec.workload is model.WorkloadKind.COLLECTIVE:
        if spec.collective is None:
            raise CatalogError(
                allowed_values_message(where, "spec.collective", None, [c.value for c in model.Collective])
            )
        return _replace(
            category,
            collective=spec.collective,
            binary=spec.binary,
            data_type=spec.data_type,
            sweep=_sweep(spec.sweep, f"{where}: spec.sweep"),
            local_sweep=_sweep(spec.local_sweep, f"{where}: spec.localSweep"),
        )
    return _replace(
        category,
        training=_training(spec.training, f"{where}: spec.training"),
        local_training=_training(spec.local_training, f"{where}: spec.localTraining"),
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
    doc = schema.decode(raw, _PlatformDoc, source=where, separator=": ", error=CatalogError)
    _expect(doc.metadata.name == path.stem, where, "metadata.name must equal the file name")
    spec = doc.spec
    return Platform(
        name=path.stem,
        description=doc.metadata.description,
        interconnect=(spec.interconnect or path.stem).lower(),
        detect_resource=spec.detect_resource,
        request_all_of=tuple(spec.request_all_of),
        capabilities=tuple(spec.capabilities),
        env=dict(sorted(spec.env.items())),
        source=spec.source,
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


def _rules(docs: list[_RuleDoc], where: str) -> list[ThresholdRule]:
    rules = []
    for index, entry in enumerate(docs):
        cel.compile_expression(entry.expression, CEL_VARIABLES, origin=f"{where}[{index}].expression")
        rules.append(
            ThresholdRule(
                metric=entry.metric,
                expression=entry.expression,
                source=entry.source,
                accelerator=entry.accelerator.lower(),
                interconnect=entry.interconnect.lower(),
                scale=entry.scale,
            )
        )
    return rules


def _sweep(entry: _SweepDoc | None, where: str) -> Sweep:
    if entry is None:
        raise CatalogError(f"{where}: must be a mapping")
    sweep = Sweep(
        min_bytes=model.parse_bytes(entry.min_bytes, f"{where}.minBytes"),
        max_bytes=model.parse_bytes(entry.max_bytes, f"{where}.maxBytes"),
        step_factor=entry.step_factor,
        iterations=entry.iterations,
        warmup_iterations=entry.warmup_iterations,
    )
    _expect(sweep.min_bytes <= sweep.max_bytes, where, "minBytes must not exceed maxBytes")
    _expect(sweep.step_factor >= 2 and sweep.iterations >= 1, where, "stepFactor ≥ 2 and iterations ≥ 1")
    return sweep


def _training(entry: _TrainingDoc | None, where: str) -> TrainingShape:
    if entry is None:
        raise CatalogError(f"{where}: must be a mapping")
    shape = TrainingShape(
        steps=entry.steps,
        warmup_steps=entry.warmup_steps,
        log_interval=entry.log_interval,
        hidden_size=entry.hidden_size,
        layers=entry.layers,
        micro_batch_size=entry.micro_batch_size,
    )
    _expect(shape.steps > shape.warmup_steps >= 0, where, "steps must exceed warmupSteps")
    return shape


def _expect(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise CatalogError(f"{where}: {message}")
