"""Certification categories as data: load, validate and look up `dsx/catalog/certification/*.yaml`.

A category names what it proves (a collective or a training job), the program that runs it on
a cluster (nccl-tests, Megatron-LM) and its shape there, the shape dsx's own torch worker runs
(`builtin`: local CPU runs, or asked for on a cluster), and its thresholds. Every absolute
threshold says what it was measured on (workload, accelerator, interconnect, node count) and
where the figure comes from; it judges only a run of that same workload on that same
hardware. Relative thresholds compare a run with its peers of the same round (`peers`) or, on
local CPU, with this machine's calibration (`reference`).

The files are decoded by msgspec schemas (`dsx.model.schema`); loading compiles every CEL
expression, so a broken catalog fails at load time with the file, the field and the allowed
values named.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import msgspec

from dsx import catalog, cel
from dsx.errors import CatalogError, NotFoundError, allowed_values_message
from dsx.model import certification as model
from dsx.model import schema

KIND = "CertificationCategory"
PLATFORM_KIND = "CertificationPlatform"
WORKLOAD_KIND = "CertificationWorkload"
CEL_VARIABLES = ("value", "reference", "peers")
"""`value`: the measured metric; `reference`: the calibrated value of the same run shape (local);
`peers`: the median of the same metric over the runs of the same shape in the same round."""
RELATIVE_VARIABLES = frozenset({"reference", "peers"})

FOLDER = "certification"
"""Where the shipped categories live in `dsx.catalog` (platforms/ and workloads/ below it)."""


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
    """The builtin worker's training job (a small MLP, data parallel)."""

    steps: int
    warmup_steps: int
    log_interval: int = 1
    hidden_size: int = 256
    layers: int = 3
    micro_batch_size: int = 16


@dataclass(frozen=True)
class MegatronShape:
    """Megatron-LM `pretrain_gpt.py` with mock data: the model a published figure was measured on."""

    model: str  # names the shape; thresholds say `megatron-lm/<model>`
    arguments: tuple[str, ...]  # model and parallelism flags, as pretrain_gpt.py takes them
    train_iterations: int
    log_interval: int
    warmup_steps: int  # logged steps left out of the averages (compilation, allocator warm-up)
    tensor_parallel: Mapping[str, int]  # accelerator → TP size; "default" for the rest
    min_gpus: int
    source: str

    def tensor_parallel_for(self, accelerator: str) -> int:
        return self.tensor_parallel.get(accelerator, self.tensor_parallel.get("default", 1))


@dataclass(frozen=True)
class MeasuredOn:
    """Where a threshold's figure was measured: it judges only runs of the same kind.

    `workload` is `Category.workload_id(...)` of the run (`nccl-tests/all_reduce_perf`,
    `megatron-lm/nemotron5-8b`); published figures name all three of workload, accelerator and
    interconnect; relative rules leave them empty ("any"); `nodes` is the node count of the
    published run, shown beside the threshold.
    """

    workload: str
    accelerator: str = ""
    interconnect: str = ""
    nodes: int | None = None

    def describe(self) -> str:
        if not self.workload:
            return "any workload (relative)"
        parts = [self.workload, self.accelerator, self.interconnect]
        if self.nodes:
            parts.append(f"{self.nodes} node{'s' if self.nodes != 1 else ''}")
        return ", ".join(parts)


@dataclass(frozen=True)
class ThresholdRule:
    """One threshold and where it applies."""

    metric: model.Metric
    expression: str
    source: str
    measured_on: MeasuredOn
    scale: model.Scale | None = None  # None: any scale

    def fits(self, workload: str, accelerator: str, interconnect: str, scale: model.Scale) -> bool:
        on = self.measured_on
        return (
            (not on.workload or on.workload == workload)
            and (not on.accelerator or on.accelerator == accelerator)
            and (not on.interconnect or on.interconnect == interconnect)
            and (self.scale is None or self.scale == scale)
        )

    @property
    def specificity(self) -> int:
        on = self.measured_on
        return sum(1 for f in (on.accelerator, on.interconnect, self.scale) if f)


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    workload: model.WorkloadKind
    scale: model.Scale
    min_nodes: int
    program: model.Program
    """What runs on a cluster; local runs (and `--workload builtin`) run dsx's worker."""
    thresholds: tuple[ThresholdRule, ...]
    """Absolute figures, each measured on one (workload, accelerator, interconnect)."""
    peer_thresholds: tuple[ThresholdRule, ...]
    """Against `peers`: what judges a cluster run no absolute figure fits."""
    local_thresholds: tuple[ThresholdRule, ...]
    """The builtin worker on local CPU: against `peers` (same round) and `reference` (calibration)."""
    collective: model.Collective | None = None
    binary: str = ""
    data_type: str = "float"
    sweep: Sweep | None = None
    local_sweep: Sweep | None = None
    local_training: TrainingShape | None = None
    megatron: MegatronShape | None = None
    source: str = ""

    def program_for(self, *, builtin: bool) -> model.Program:
        return model.Program.BUILTIN if builtin else self.program

    def workload_id(self, program: model.Program) -> str:
        """What a threshold's `measuredOn.workload` names: the program and what it ran."""
        if program is model.Program.BUILTIN:
            return f"builtin/{self.collective.value if self.collective else 'training'}"
        if program is model.Program.MEGATRON_LM:
            return f"megatron-lm/{self.megatron.model if self.megatron else '?'}"
        return f"nccl-tests/{self.binary}"


@dataclass(frozen=True)
class Platform:
    """How a cluster's pods reach the GPU fabric: devices to request, variables to set, what NCCL should use."""

    name: str
    description: str
    interconnect: str
    detect_resource: str  # nodes allocating this resource use this platform; "" = the fallback
    request_all_of: tuple[str, ...]  # resources requested in full (the node's allocatable count)
    capabilities: tuple[str, ...]
    env: Mapping[str, str]
    source: str
    network: model.Transport | None = None
    """The NCCL network plugin a multi-node run must use here; None: any (TCP is the platform)."""
    images: Mapping[model.Program, str] = field(default_factory=dict)
    """Per program, an image that carries this fabric's plugins (EFA: aws-ofi-nccl, libfabric)."""
    nccl_tests_path: str = ""
    """Where the image keeps the nccl-tests binaries; "" = the workload's default."""
    mpirun: str = ""
    """The image's mpirun; "" = the workload's default."""


BUILTIN_RUNTIME = "dsx-torch"
"""The runtime dsx's builtin worker runs in on a cluster (under torchrun)."""


@dataclass(frozen=True)
class Workload:
    """A program as it runs on a cluster: the default image, its tools, the Trainer runtime it needs."""

    program: model.Program
    description: str
    image: str
    runtime: str  # the ClusterTrainingRuntime / TrainingRuntime name (catalog component kubeflow-trainer-runtimes)
    source: str
    single_node_runtime: str = ""  # for runs on one node, where it differs (nccl-tests: no mpirun)
    nccl_tests_path: str = ""
    mpirun: str = ""
    binary_suffix: str = ""  # NGC images name the MPI build `all_reduce_perf_mpi`
    megatron_path: str = ""  # where the image keeps Megatron-LM (pretrain_gpt.py)


# -- the documents: msgspec schemas (dsx.model.schema names file, field path and allowed values);
# what a schema cannot say (CEL that compiles, sizes like 16G, one field against another) follows.


class _Spec(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A spec section: camelCase keys, unknown keys refused with the allowed ones listed."""


class _Metadata(msgspec.Struct, frozen=True, kw_only=True):
    name: str | None = None
    description: str = ""


class _MeasuredOnDoc(_Spec, frozen=True, kw_only=True):
    workload: Annotated[str, msgspec.Meta(min_length=1)]
    accelerator: str = ""
    interconnect: str = ""
    nodes: Annotated[int, msgspec.Meta(ge=1)] | None = None


class _RuleDoc(_Spec, frozen=True, kw_only=True):
    metric: model.Metric
    expression: str
    source: Annotated[str, msgspec.Meta(min_length=1)]
    measured_on: _MeasuredOnDoc | None = None  # absolute thresholds only
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


class _MegatronDoc(_Spec, frozen=True, kw_only=True):
    model: Annotated[str, msgspec.Meta(min_length=1)]
    arguments: list[str]
    train_iterations: Annotated[int, msgspec.Meta(ge=1)]
    log_interval: Annotated[int, msgspec.Meta(ge=1)]
    warmup_steps: Annotated[int, msgspec.Meta(ge=0)] = 0
    tensor_parallel: dict[str, Annotated[int, msgspec.Meta(ge=1)]] = {}
    min_gpus: Annotated[int, msgspec.Meta(ge=1)] = 1
    source: Annotated[str, msgspec.Meta(min_length=1)]


class _CategorySpec(_Spec, frozen=True, kw_only=True):
    workload: model.WorkloadKind
    program: model.Program
    scale: model.Scale
    min_nodes: int = 2
    thresholds: list[_RuleDoc] = []
    peer_thresholds: list[_RuleDoc] = []
    local_thresholds: list[_RuleDoc] = []
    collective: model.Collective | None = None
    binary: str = ""
    data_type: str = "float"
    sweep: _SweepDoc | None = None
    local_sweep: _SweepDoc | None = None
    local_training: _TrainingDoc | None = None
    megatron: _MegatronDoc | None = None


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
    network: model.Transport | None = None
    images: dict[model.Program, str] = {}
    nccl_tests_path: str = ""
    mpirun: str = ""
    source: Annotated[str, msgspec.Meta(min_length=1)]


class _PlatformDoc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    kind: str
    metadata: _Metadata
    spec: _PlatformSpec


class _WorkloadSpec(_Spec, frozen=True, kw_only=True):
    program: model.Program
    image: Annotated[str, msgspec.Meta(min_length=1)]
    runtime: Annotated[str, msgspec.Meta(min_length=1)]
    single_node_runtime: str = ""
    nccl_tests_path: str = ""
    mpirun: str = ""
    binary_suffix: str = ""
    megatron_path: str = ""
    source: Annotated[str, msgspec.Meta(min_length=1)]


class _WorkloadDoc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    kind: str
    metadata: _Metadata
    spec: _WorkloadSpec


def category_from_dict(raw: Mapping[str, Any], source: str) -> Category:
    """A category file's mapping; `source` is its path (the file name is the category's name)."""
    path = Path(source)
    where = path.name
    _expect(raw.get("apiVersion") == model.API_VERSION, where, f"apiVersion must be {model.API_VERSION}")
    _expect(raw.get("kind") == KIND, where, f"kind must be {KIND}")
    doc = schema.decode(raw, _CategoryDoc, source=where, separator=": ", error=CatalogError)
    _expect(doc.metadata.name == path.stem, where, "metadata.name must equal the file name")
    spec = doc.spec
    _expect(spec.program is not model.Program.BUILTIN, where, "spec.program names a cluster program, not builtin")
    category = Category(
        name=path.stem,
        description=doc.metadata.description,
        workload=spec.workload,
        scale=spec.scale,
        min_nodes=spec.min_nodes,
        program=spec.program,
        thresholds=(),
        peer_thresholds=(),
        local_thresholds=(),
        source=source,
    )
    if spec.workload is model.WorkloadKind.COLLECTIVE:
        if spec.collective is None:
            raise CatalogError(
                allowed_values_message(where, "spec.collective", None, [c.value for c in model.Collective])
            )
        _expect(spec.program is model.Program.NCCL_TESTS, where, "a collective category runs nccl-tests")
        _expect(bool(spec.binary), where, "spec.binary names the nccl-tests binary (e.g. all_reduce_perf)")
        category = replace(
            category,
            collective=spec.collective,
            binary=spec.binary,
            data_type=spec.data_type,
            sweep=_sweep(spec.sweep, f"{where}: spec.sweep"),
            local_sweep=_sweep(spec.local_sweep, f"{where}: spec.localSweep"),
        )
    else:
        _expect(spec.program is model.Program.MEGATRON_LM, where, "a training category runs megatron-lm")
        category = replace(
            category,
            local_training=_training(spec.local_training, f"{where}: spec.localTraining"),
            megatron=_megatron(spec.megatron, f"{where}: spec.megatron"),
        )
    cluster_workload = category.workload_id(category.program)
    return replace(
        category,
        thresholds=tuple(_rules(spec.thresholds, f"{where}: spec.thresholds", cluster_workload)),
        peer_thresholds=tuple(_rules(spec.peer_thresholds, f"{where}: spec.peerThresholds")),
        local_thresholds=tuple(_rules(spec.local_thresholds, f"{where}: spec.localThresholds")),
    )


@functools.lru_cache(maxsize=1)
def load_all() -> dict[str, Category]:
    """Every shipped category by name, in name order."""
    return {c.name: c for c in (category_from_dict(*_shipped(FOLDER, name)) for name in catalog.names(FOLDER))}


@functools.lru_cache(maxsize=1)
def platforms() -> dict[str, Platform]:
    """Every shipped platform (`platforms/*.yaml`) by name, in name order."""
    shipped = (platform_from_dict(*_shipped(FOLDER, "platforms", name)) for name in catalog.names(FOLDER, "platforms"))
    return {p.name: p for p in shipped}


@functools.lru_cache(maxsize=1)
def workloads() -> dict[model.Program, Workload]:
    """Every shipped cluster workload (`workloads/*.yaml`) by program."""
    loaded = [workload_from_dict(*_shipped(FOLDER, "workloads", name)) for name in catalog.names(FOLDER, "workloads")]
    return {w.program: w for w in loaded}


def _shipped(*parts: str) -> tuple[dict[str, Any], str]:
    """A shipped file's mapping and its path, the arguments of the `…_from_dict` functions."""
    file = (*parts[:-1], f"{parts[-1]}.yaml")
    return catalog.mapping(*file), str(catalog.path(*file))


def platform_from_dict(raw: Mapping[str, Any], source: str) -> Platform:
    path = Path(source)
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
        network=spec.network,
        images=dict(sorted(spec.images.items())),
        nccl_tests_path=spec.nccl_tests_path,
        mpirun=spec.mpirun,
    )


def workload_from_dict(raw: Mapping[str, Any], source: str) -> Workload:
    path = Path(source)
    where = f"workloads/{path.name}"
    _expect(raw.get("kind") == WORKLOAD_KIND, where, f"kind must be {WORKLOAD_KIND}")
    doc = schema.decode(raw, _WorkloadDoc, source=where, separator=": ", error=CatalogError)
    _expect(doc.metadata.name == path.stem, where, "metadata.name must equal the file name")
    spec = doc.spec
    _expect(spec.program.value == path.stem, where, "spec.program must equal the file name")
    return Workload(
        program=spec.program,
        description=doc.metadata.description,
        image=spec.image,
        runtime=spec.runtime,
        source=spec.source,
        single_node_runtime=spec.single_node_runtime,
        nccl_tests_path=spec.nccl_tests_path,
        mpirun=spec.mpirun,
        binary_suffix=spec.binary_suffix,
        megatron_path=spec.megatron_path,
    )


def names() -> list[str]:
    return list(load_all())


def get(name: str) -> Category:
    categories = load_all()
    if name not in categories:
        raise NotFoundError(allowed_values_message("categories", "category", name, list(categories)))
    return categories[name]


def _rules(docs: list[_RuleDoc], where: str, workload: str = "") -> list[ThresholdRule]:
    """Absolute rules (`workload` given: the category's cluster workload) name what they were
    measured on; relative ones (against `peers` or `reference`) hold for any workload."""
    rules = []
    for index, entry in enumerate(docs):
        at = f"{where}[{index}]"
        cel.compile_expression(entry.expression, CEL_VARIABLES, origin=f"{at}.expression")
        relative = any(name in entry.expression for name in RELATIVE_VARIABLES)
        on = entry.measured_on
        if not workload:
            _expect(relative, at, "compares with `peers` or `reference` (a published figure goes in spec.thresholds)")
            _expect(on is None, at, "measuredOn belongs to published figures (spec.thresholds)")
            measured_on = MeasuredOn("")
        else:
            _expect(not relative, at, "a published figure cannot use `peers` or `reference`")
            if on is None:
                raise CatalogError(f"{at}: measuredOn names the workload, accelerator and interconnect of the figure")
            if on.workload != workload:
                raise CatalogError(allowed_values_message(at, "measuredOn.workload", on.workload, [workload]))
            _expect(bool(on.accelerator and on.interconnect), at, "measuredOn names its accelerator and interconnect")
            measured_on = MeasuredOn(on.workload, on.accelerator.lower(), on.interconnect.lower(), on.nodes)
        rules.append(
            ThresholdRule(
                metric=entry.metric,
                expression=entry.expression,
                source=entry.source,
                measured_on=measured_on,
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


def _megatron(entry: _MegatronDoc | None, where: str) -> MegatronShape:
    if entry is None:
        raise CatalogError(f"{where}: must be a mapping")
    logged = entry.train_iterations // entry.log_interval
    _expect(logged > entry.warmup_steps, where, "trainIterations / logInterval must exceed warmupSteps")
    return MegatronShape(
        model=entry.model,
        arguments=tuple(entry.arguments),
        train_iterations=entry.train_iterations,
        log_interval=entry.log_interval,
        warmup_steps=entry.warmup_steps,
        tensor_parallel=dict(sorted(entry.tensor_parallel.items())),
        min_gpus=entry.min_gpus,
        source=entry.source,
    )


def _expect(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise CatalogError(f"{where}: {message}")


def describe(rule: ThresholdRule) -> dict[str, Any]:
    """A threshold as `dsx certify categories` and reports show it."""
    out: dict[str, Any] = {
        "metric": rule.metric.value,
        "expression": rule.expression,
        "measuredOn": rule.measured_on.describe(),
        "source": rule.source,
    }
    if rule.scale is not None:
        out["scale"] = rule.scale.value
    return out
