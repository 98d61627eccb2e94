"""What a certification asks for and what it concludes.

A certification runs catalog categories (NCCL collectives, a training job) over groups of
nodes and ends with one verdict per group, per node and overall. The request
(`Certification`) is what a user or a recipe's `certification:` block states; the verdict
types are what every executor, report and consumer (NVSentinel-style quarantine) reads.
Reasons form a closed set so a consumer can act on them without parsing messages; the
message and evidence lines carry the detail.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec

from dsx.errors import BadInputError, allowed_values_message
from dsx.model import schema

API_VERSION = "dsx.certify/v1alpha1"


class Collective(enum.StrEnum):
    """The nccl-tests collectives a category can exercise (value = torch/nccl-tests stem)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    ALLTOALL = "alltoall"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"


class WorkloadKind(enum.StrEnum):
    COLLECTIVE = "collective"
    TRAINING = "training"


class Program(enum.StrEnum):
    """What runs for a category: the ecosystem's program on a cluster, or dsx's own torch worker.

    A figure measured with one program never judges another (`certify_catalog.MeasuredOn`).
    """

    NCCL_TESTS = "nccl-tests"  # NVIDIA/nccl-tests `*_perf`, mpirun across nodes, `-g` on one node
    MEGATRON_LM = "megatron-lm"  # Megatron-LM pretrain_gpt.py with mock data
    BUILTIN = "builtin"  # dsx.executors.local.worker: local runs, or asked for with --workload builtin


class Transport(enum.StrEnum):
    """How NCCL moved data, as its INFO lines name it (`Using network IB`, `via P2P/IPC`)."""

    NET_IB = "NET/IB"  # InfiniBand or RoCE verbs (NCCL's IB plugin, incl. IBext/SHARP)
    NET_OFI = "NET/OFI"  # libfabric (aws-ofi-nccl: EFA)
    NET_SOCKET = "NET/Socket"  # TCP sockets: the fallback when no RDMA plugin loads
    NET_TCPX = "NET/TCPX"  # GCP GPUDirect-TCPX/TCPXO (FasTrak)
    NVLS = "NVLS"  # NVLink SHARP (NVSwitch multicast)
    P2P = "P2P"  # peer-to-peer over NVLink or PCIe between GPUs of one node
    SHM = "SHM"  # host shared memory between GPUs of one node: the intra-node fallback


class Scale(enum.StrEnum):
    """How nodes are grouped for one category run."""

    INTRA_NODE = "intra-node"  # one group per node (loopback across its own GPUs)
    INTRA_GROUP = "intra-group"  # one group per NVLink clique or rack; all nodes when unlabelled
    FULL_SCALE = "full-scale"  # every eligible node in one group


class Metric(enum.StrEnum):
    """Measured values a threshold can test (CEL variable `value`)."""

    BUS_BANDWIDTH_GBPS = "busBandwidthGBps"  # max over message sizes, out-of-place
    ALG_BANDWIDTH_GBPS = "algBandwidthGBps"  # max over message sizes, out-of-place
    AVG_STEP_TIME_SECONDS = "avgStepTimeSeconds"  # training, warm-up steps excluded
    AVG_TFLOPS_PER_GPU = "avgTflopsPerGpu"
    GOODPUT_RATIO = "goodputRatio"

    @classmethod
    def _missing_(cls, value: object) -> Metric | None:
        """Earlier dsx spelled the bandwidth keys `…Gbps` (gigabits); recipes and calibration files may still."""
        return _LEGACY_METRICS.get(str(value))

    @property
    def label(self) -> str:
        """Words for reports and progress lines."""
        return _METRIC_DISPLAY[self][0]

    @property
    def unit(self) -> str:
        """The unit values are shown in (bandwidth in GB/s, gigabytes per second, as nccl-tests prints it)."""
        return _METRIC_DISPLAY[self][1]

    @property
    def higher_is_better(self) -> bool:
        return self is not Metric.AVG_STEP_TIME_SECONDS

    def shown(self, value: float) -> float:
        """`value` in `unit` (step time is kept in seconds and shown in milliseconds)."""
        return value * _METRIC_DISPLAY[self][2]

    def with_unit(self, value: float) -> str:
        """`11.8 GB/s`, `74.5 ms`: three significant digits and the unit."""
        return f"{self.shown(value):.3g} {self.unit}".rstrip()


_LEGACY_METRICS = {"busBandwidthGbps": Metric.BUS_BANDWIDTH_GBPS, "algBandwidthGbps": Metric.ALG_BANDWIDTH_GBPS}

_METRIC_DISPLAY: dict[Metric, tuple[str, str, float]] = {
    Metric.BUS_BANDWIDTH_GBPS: ("bus bandwidth", "GB/s", 1.0),
    Metric.ALG_BANDWIDTH_GBPS: ("algorithm bandwidth", "GB/s", 1.0),
    Metric.AVG_STEP_TIME_SECONDS: ("step time", "ms", 1e3),
    Metric.AVG_TFLOPS_PER_GPU: ("TFLOPS per GPU", "TFLOPS", 1.0),
    Metric.GOODPUT_RATIO: ("goodput", "", 1.0),
}


class Status(enum.StrEnum):
    """Verdict of one group or one node."""

    PASSED = "PASSED"
    FAILED = "FAILED"
    EXCLUDED = "EXCLUDED"


class Reason(enum.StrEnum):
    """Why a group or node did not pass: the closed set consumers act on."""

    THRESHOLD_VIOLATION = "ThresholdViolation"  # measured value misses the expected one
    WORKLOAD_FAILED = "WorkloadFailed"  # a rank exited non-zero or produced no result
    TIMEOUT = "Timeout"  # the run hung or ran past its deadline
    WRONG_RESULTS = "WrongResults"  # #wrong > 0 or out-of-bounds values
    NETWORK_ERROR = "NetworkError"  # an NCCL/transport error line in the log
    TRANSPORT_FALLBACK = "TransportFallback"  # NCCL used another transport than the platform's
    NOT_STARTED = "NotStarted"  # the run's pods could not be scheduled or started (reason named)
    COMMON_CAUSE = "CommonCause"  # every node of a round failed alike: the cause is shared, not a node
    EXCLUDED = "Excluded"  # the node was not eligible (see ExclusionCause)


class ExclusionCause(enum.StrEnum):
    CORDONED = "Cordoned"
    TOO_FEW_GPUS = "TooFewGPUs"
    MINORITY_ARCHITECTURE = "MinorityArchitecture"
    NOT_SELECTED = "NotSelected"


class Result(enum.StrEnum):
    """Overall result, as NVCRE reports it. INCOMPLETE: passed, but some nodes were not tested."""

    PASSED = "PASSED"
    FAILED = "FAILED"
    RUNNING = "RUNNING"
    INCOMPLETE = "INCOMPLETE"


class FaultKind(enum.StrEnum):
    """Faults the local executor can inject into one simulated node (tests and demos)."""

    SLOW = "slow"  # the node's link runs at a fraction of its rate
    HANG = "hang"  # the node's ranks stall mid-run
    CRASH = "crash"  # the node's ranks exit non-zero
    CORRUPT = "corrupt"  # the node's ranks produce wrong results


@dataclass(frozen=True)
class FaultInjection:
    node: str
    kind: FaultKind

    @classmethod
    def parse(cls, text: str, *, source: str = "--inject") -> FaultInjection:
        node, sep, kind = text.rpartition(":")
        if not sep or not node:
            raise BadInputError(f"{source}: {text!r} is not NODE:KIND (e.g. node-5:slow)")
        try:
            return cls(node=node, kind=FaultKind(kind))
        except ValueError:
            raise BadInputError(allowed_values_message(source, "kind", kind, [k.value for k in FaultKind])) from None

    def __str__(self) -> str:
        return f"{self.node}:{self.kind.value}"


@dataclass(frozen=True)
class CandidateNode:
    """The facts grouping needs about one node, whatever the executor (sim, cluster, local)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    allocatable_gpus: int | None = None  # None: unknown (kept)
    gpu_product: str = ""  # nvidia.com/gpu.product
    network_devices: Mapping[str, int] = field(default_factory=dict)
    """Allocatable device-plugin resources besides GPUs (e.g. vpc.amazonaws.com/efa: 32)."""


class Target(schema.Section, frozen=True):
    """Which nodes to certify: explicit names win over a selector; `node_count` caps local runs.

    Its own schema in a certification block's `target` (change one with `msgspec.structs.replace`).
    """

    node_names: tuple[str, ...] = ()
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    node_count: Annotated[int, msgspec.Meta(ge=1)] | None = None

    def selects(self, node: CandidateNode) -> bool:
        if self.node_names:
            return node.name in self.node_names
        return all(node.labels.get(k) == v for k, v in self.node_selector.items())


@dataclass(frozen=True)
class CategoryRequest:
    """One category to run, with per-category overrides of the catalog defaults."""

    name: str
    scale: Scale | None = None
    thresholds: Mapping[Metric, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Timeouts:
    run_timeout_seconds: float = 3600.0
    """Deadline of one workload run on one group (NVCRE timeoutPerJob, 1 h)."""

    stall_timeout_seconds: float = 1200.0
    """A run that prints nothing for this long is a hang (NVCRE startup stall budget, 20 min)."""


@dataclass(frozen=True)
class Certification:
    """A certification request: the nodes, the categories, and how to judge them."""

    name: str = "certification"
    target: Target = field(default_factory=Target)
    categories: tuple[CategoryRequest, ...] = ()
    thresholds: Mapping[Metric, str] = field(default_factory=dict)
    scale: Scale | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    ranks_per_node: int = 1
    accelerator: str = ""  # e.g. h100; "" = detect from nodes
    interconnect: str = ""  # e.g. efa, roce, infiniband, tcpxo
    isolate: bool = True  # run adaptive fault isolation on failed groups
    injections: tuple[FaultInjection, ...] = ()
    builtin: bool = False
    """Run dsx's own torch worker instead of the category's program (always so on local CPU);
    judged only against its peers, never by another program's published figures."""

    def thresholds_for(self, category: str) -> dict[Metric, str]:
        """Global overrides, then the category's own (per-category wins)."""
        merged = dict(self.thresholds)
        for request in self.categories:
            if request.name == category:
                merged.update(request.thresholds)
        return merged

    def scale_for(self, category: str) -> Scale | None:
        for request in self.categories:
            if request.name == category and request.scale is not None:
                return request.scale
        return self.scale

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str = "certification") -> Certification:
        """Read the camelCase form used in a recipe's `certification:` block or a spec file."""
        doc = schema.decode(raw, _CertificationDoc, source=source, separator=": ")
        categories = []
        for index, entry in enumerate(doc.categories):
            if isinstance(entry, str):
                categories.append(CategoryRequest(name=entry))
                continue
            where = f"{source}: categories[{index}]"
            thresholds = parse_thresholds(entry.thresholds, f"{where}.thresholds")
            categories.append(CategoryRequest(name=entry.name, scale=entry.scale, thresholds=thresholds))
        return cls(
            name=doc.name,
            target=doc.target,
            categories=tuple(categories),
            thresholds=parse_thresholds(doc.thresholds, f"{source}.thresholds"),
            scale=doc.scale,
            timeouts=Timeouts(
                run_timeout_seconds=float(doc.run_timeout_seconds),
                stall_timeout_seconds=float(doc.stall_timeout_seconds),
            ),
            ranks_per_node=doc.ranks_per_node,
            accelerator=doc.accelerator.lower(),
            interconnect=doc.interconnect.lower(),
            isolate=doc.isolate,
            builtin=doc.workload == Program.BUILTIN.value,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        target: dict[str, Any] = {}
        if self.target.node_names:
            target["nodeNames"] = list(self.target.node_names)
        if self.target.node_selector:
            target["nodeSelector"] = dict(sorted(self.target.node_selector.items()))
        if self.target.node_count is not None:
            target["nodeCount"] = self.target.node_count
        out["target"] = target
        categories: list[Any] = []
        for request in self.categories:
            if request.scale is None and not request.thresholds:
                categories.append(request.name)
                continue
            entry: dict[str, Any] = {"name": request.name}
            if request.scale is not None:
                entry["scale"] = request.scale.value
            if request.thresholds:
                entry["thresholds"] = {m.value: e for m, e in request.thresholds.items()}
            categories.append(entry)
        out["categories"] = categories
        if self.thresholds:
            out["thresholds"] = {m.value: e for m, e in self.thresholds.items()}
        if self.scale is not None:
            out["scale"] = self.scale.value
        out["runTimeoutSeconds"] = self.timeouts.run_timeout_seconds
        out["stallTimeoutSeconds"] = self.timeouts.stall_timeout_seconds
        out["ranksPerNode"] = self.ranks_per_node
        if self.accelerator:
            out["accelerator"] = self.accelerator
        if self.interconnect:
            out["interconnect"] = self.interconnect
        out["isolate"] = self.isolate
        if self.builtin:
            out["workload"] = Program.BUILTIN.value
        return out


_Positive = Annotated[int, msgspec.Meta(ge=1)]
_Seconds = Annotated[float, msgspec.Meta(gt=0)]


class _CategoryDoc(schema.Section, frozen=True):
    name: str
    scale: Scale | None = None
    thresholds: dict[str, Any] = msgspec.field(default_factory=dict)  # parse_thresholds: metrics, old names, CEL


class _CertificationDoc(schema.Section, frozen=True):
    """A certification request's shape (see `Certification.from_dict`); defaults are `Timeouts`'."""

    name: str = "certification"
    categories: tuple[str | _CategoryDoc, ...] = ()
    thresholds: dict[str, Any] = msgspec.field(default_factory=dict)
    scale: Scale | None = None
    target: Target = Target()
    run_timeout_seconds: _Seconds = Timeouts.run_timeout_seconds
    stall_timeout_seconds: _Seconds = Timeouts.stall_timeout_seconds
    ranks_per_node: _Positive = 1
    accelerator: str = ""
    interconnect: str = ""
    isolate: bool = True
    workload: Literal["", "builtin"] = ""
    """`builtin`: dsx's own torch worker instead of each category's program."""


def parse_thresholds(raw: Any, source: str) -> dict[Metric, str]:
    """`{busBandwidthGBps: "value >= 380.0"}` → typed keys; the CEL is compiled later."""
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{source}: must be a mapping of metric to CEL expression")
    out: dict[Metric, str] = {}
    for key, expression in raw.items():
        try:
            metric = Metric(key)
        except ValueError:
            raise BadInputError(allowed_values_message(source, "metric", key, [m.value for m in Metric])) from None
        if not isinstance(expression, str) or not expression.strip():
            raise BadInputError(f"{source}.{key}: must be a CEL expression over `value`, e.g. 'value >= 380.0'")
        out[metric] = expression.strip()
    return out


# --- verdicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """Why a group or node failed: a reason from the closed set plus the evidence."""

    reason: Reason
    message: str
    metric: Metric | None = None
    measured: float | None = None
    expected: float | None = None
    expression: str = ""
    exit_code: int | None = None
    evidence: tuple[str, ...] = ()
    run: str = ""  # the run that showed it

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason.value, "message": self.message}
        if self.metric is not None:
            out["metric"] = self.metric.value
        if self.measured is not None:
            out["measured"] = _finite(self.measured)
        if self.expected is not None:
            out["expected"] = _finite(self.expected)
        if self.expression:
            out["expression"] = self.expression
        if self.exit_code is not None:
            out["exitCode"] = self.exit_code
        if self.evidence:
            out["evidence"] = list(self.evidence)
        if self.run:
            out["run"] = self.run
        return out


@dataclass(frozen=True)
class NodeVerdict:
    name: str
    status: Status
    failure: Failure | None = None
    exclusion: ExclusionCause | None = None
    group: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status.value}
        if self.group:
            out["group"] = self.group
        if self.exclusion is not None:
            out["reason"] = Reason.EXCLUDED.value
            out["exclusion"] = self.exclusion.value
        if self.failure is not None:
            out.update(self.failure.to_dict())
        return out


def overall_result(statuses: Sequence[Status], *, running: bool = False) -> Result:
    """FAILED beats everything; any exclusion turns a pass into INCOMPLETE; RUNNING until done."""
    if Status.FAILED in statuses:
        return Result.FAILED
    if running:
        return Result.RUNNING
    if Status.EXCLUDED in statuses or not statuses:
        return Result.INCOMPLETE
    return Result.PASSED


# --- field readers ----------------------------------------------------------------------------


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_bytes(value: Any, source: str) -> int:
    """nccl-tests style sizes: 8, 1K, 16M, 16G (binary multiples, as nccl-tests reads them)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise BadInputError(f"{source}: {value!r} is not a size like 8, 1K, 16M or 16G")
    number = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if number < 1 or number != int(number):
        raise BadInputError(f"{source}: {value!r} must be a whole number of bytes ≥ 1")
    return int(number)
