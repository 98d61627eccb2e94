"""The sentinel's configuration file (kind SentinelPolicy): stage switches, rules and knobs.

Why one file: an operator reviews one document to know what the sentinel may do to a fleet.
Stages that change the cluster (quarantine, drain, remediation, recertify, validation) are
OFF unless the file (or `--enable`) turns them on, as NVSentinel ships observing only; a stage
that is off does nothing and writes nothing per event (its cursor follows the stage before it). A global `dryRun`
and a per-stage `dryRun` make an enabled stage record what it would do without touching the
cluster or the node states (so the stages after it stay idle: to see the whole chain without
acting, use `dsx sentinel replay`).

Keys are camelCase, as in Kubernetes configuration kinds (KubeletConfiguration); units are in
the names. Files written before that (snake_case: `dry_run`, `rule_sets`) are still read, with
one warning per old key. The file is decoded by a schema (`PolicyDocument`, msgspec); every
error names the file and the field. A section left out takes the shipped defaults (a policy
without `quarantine.ruleSets` uses the shipped rule sets; `ruleSets: []` means none). The
default policy is data: `src/dsx/catalog/rules/sentinel-default.yaml`. Reference: docs/sentinel.md.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from dsx import catalog, cel
from dsx.errors import BadInputError, allowed_values_message
from dsx.health.decisions import nodes
from dsx.health.decisions.ports import RemediationKind, Taint, TaintEffect
from dsx.health.parsing import xid
from dsx.model import schema
from dsx.model.certification import FaultKind, Metric, Scale
from dsx.model.health import RecommendedAction, event_rule

log = logging.getLogger("dsx.health.decisions.policy")

API_VERSION = "dsx.health/v1alpha1"
KIND = "SentinelPolicy"
DEFAULT_PARTS = ("rules", "sentinel-default.yaml")
DEFAULT_PATH = catalog.path(*DEFAULT_PARTS)
RULE_VARIABLES = ("event", "node")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
_Positive = Annotated[float, msgspec.Meta(gt=0)]
_AtLeastZero = Annotated[float, msgspec.Meta(ge=0)]
_AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
# A section whose settings are its keys as written is its own schema (a `schema.Section`:
# `BreakerSettings`, `DrainSettings`, ...): one type, the defaults stated once, the limits checked
# when decoding. The sections that compile what they read (CEL rule sets, enum-keyed maps) keep a
# document struct below, turned into their settings by `from_dict`.


class Stage(enum.StrEnum):
    ANALYZER = "analyzer"
    QUARANTINE = "quarantine"
    DRAIN = "drain"
    REMEDIATION = "remediation"
    RECERTIFY = "recertify"
    VALIDATION = "validation"
    MAINTENANCE = "maintenance"


PIPELINE = (Stage.QUARANTINE, Stage.DRAIN, Stage.REMEDIATION, Stage.RECERTIFY)
"""The stages an event passes in order; each waits for the one before it."""
CLUSTER_CHANGING = frozenset({*PIPELINE, Stage.VALIDATION, Stage.MAINTENANCE})


@dataclass(frozen=True)
class StageSwitch:
    enabled: bool = False
    dry_run: bool = False

    @property
    def acting(self) -> bool:
        """True when the stage may change the cluster and the node states."""
        return self.enabled and not self.dry_run


@dataclass(frozen=True)
class RuleSet:
    """Quarantine rule set: when its CEL conditions hold for (event, node), do what it says."""

    name: str
    match_all: tuple[cel.Program, ...] = ()
    match_any: tuple[cel.Program, ...] = ()
    cordon: bool = True
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, bindings: Mapping[str, Any]) -> bool:
        return all(p.test(bindings) for p in self.match_all) and (
            not self.match_any or any(p.test(bindings) for p in self.match_any)
        )


@dataclass(frozen=True)
class QuarantineSettings:
    rule_sets: tuple[RuleSet, ...] = ()
    opt_out_label: tuple[str, str] = (nodes.DEFAULT_OPT_OUT_LABEL, "false")
    """(key, value): a node carrying it is never quarantined."""


class BreakerMode(enum.StrEnum):
    LEVEL = "Level"
    """Count the nodes out of service now (quarantined through failed), however long ago they went."""
    RATE = "Rate"
    """Count the quarantines that began within `windowSeconds`."""


class BreakerSettings(schema.Section, frozen=True):
    enabled: bool = True
    max_quarantined_percent: _Positive = 10.0
    """Quarantining a node that would put more than this share of GPU nodes in quarantine trips the breaker."""
    window_seconds: _Positive = 1800.0
    """Rate mode: only quarantines that began within this window count."""
    max_quarantined_nodes: _AtLeastOne | None = None
    """An absolute cap beside the percentage (the lower of the two holds); None: the percentage alone."""
    mode: BreakerMode = BreakerMode.LEVEL


class DrainMode(enum.StrEnum):
    IMMEDIATE = "Immediate"
    """Evict now through the Eviction API; PodDisruptionBudgets are honoured with backoff."""
    ALLOW_COMPLETION = "AllowCompletion"
    """Never evict: wait for the pods to finish."""
    DELETE_AFTER_TIMEOUT = "DeleteAfterTimeout"
    """Wait up to `timeout_seconds` for the pods to finish, then delete them."""


class NamespaceMode(schema.Section, frozen=True, kw_only=False):
    pattern: _NonEmpty = msgspec.field(name="match")
    """Namespace name or glob (`batch-*`); `match` in the file."""
    mode: DrainMode = DrainMode.IMMEDIATE
    timeout_seconds: _AtLeastZero = 600.0


class DrainSettings(schema.Section, frozen=True):
    default_mode: DrainMode = DrainMode.IMMEDIATE
    namespaces: tuple[NamespaceMode, ...] = ()
    """First matching entry wins."""
    system_namespaces: tuple[_NonEmpty, ...] = ("kube-system", "kube-public", "kube-node-lease")
    """Never drained (globs allowed)."""
    evictions_per_second: _Positive = 10.0
    eviction_burst: _AtLeastOne = 20
    backoff_seconds: _Positive = 1.0
    """First wait after a PodDisruptionBudget refused an eviction; doubles per refusal."""
    max_backoff_seconds: _Positive = 30.0
    poll_seconds: _Positive = 2.0
    """How often a drain waiting on pods looks again."""
    grace_period_seconds: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Passed to evictions and deletions; None keeps each pod's own."""


class ProviderKind(enum.StrEnum):
    NONE = "none"
    SIM = "sim"
    SCRIPT = "script"
    WEBHOOK = "webhook"


class ProviderSettings(schema.Section, frozen=True):
    kind: ProviderKind = ProviderKind.NONE
    command: tuple[_NonEmpty, ...] = ()
    """script: the argument list; {node}, {kind}, {request_id}, {gpus} and {reason} are filled in per argument."""
    url: str = ""
    """webhook: where the request is POSTed as JSON."""
    token_file: str = ""
    """webhook: a file holding the bearer token."""
    timeout_seconds: _Positive = 900.0


DEFAULT_ACTIONS: Mapping[RecommendedAction, RemediationKind] = {
    RecommendedAction.COMPONENT_RESET: RemediationKind.RESET_GPU,
    RecommendedAction.RESTART_VM: RemediationKind.REBOOT_NODE,
    RecommendedAction.RESTART_BM: RemediationKind.REBOOT_NODE,
    RecommendedAction.REPLACE_VM: RemediationKind.REPLACE_NODE,
}


@dataclass(frozen=True)
class RemediationSettings:
    provider: ProviderSettings = field(default_factory=ProviderSettings)
    actions: Mapping[RecommendedAction, RemediationKind] = field(default_factory=lambda: dict(DEFAULT_ACTIONS))
    """Recommended action → request; an action not listed escalates (remediation-failed, stays cordoned)."""


@dataclass(frozen=True)
class CategoryChoice:
    name: str
    scale: Scale | None = None


NOT_YET_CERTIFIED = Taint(f"{nodes.PREFIX}/not-yet-certified", TaintEffect.NO_SCHEDULE)
DEFAULT_RUN_NAMESPACE = "dsx-runs"
"""Where certification workloads run unless `certification.namespace` says otherwise (as `dsx certify run`)."""


@dataclass(frozen=True)
class CertificationSettings:
    """How re-certification and validation requests certify a node (through the certify engine)."""

    categories: tuple[CategoryChoice, ...] = (
        CategoryChoice("nccl-loopback"),
        CategoryChoice("training", Scale.INTRA_NODE),
    )
    group_categories: tuple[str, ...] = ("nccl-all-reduce",)
    """Run for joining and drifted nodes alongside `group_peers` known-good nodes."""
    group_peers: int = 1
    ranks_per_node: int = 2
    run_timeout_seconds: float = 600.0
    stall_timeout_seconds: float = 60.0
    max_running: int = 2
    """At most this many nodes certify at once (re-certification and validation requests together)."""
    inject: Mapping[str, FaultKind] = field(default_factory=dict)
    """Node → fault the local executor injects into that node's runs (tests and demos)."""
    taint: Taint = field(default_factory=lambda: NOT_YET_CERTIFIED)
    """Holds a joining (or re-validated) node out of scheduling until it passes."""
    joining_batch_seconds: float = 60.0
    """A joining node opens a batch that closes this long after; its nodes then certify together
    (`max_running` at once, no node in two groups). 0: each node at once."""
    joining_selector: str = ""
    """CEL over `node` (the Node object): which joining GPU nodes are held and validated; empty: every
    one `gpuNodeSelector` matches (e.g. `node.metadata.labels['node.kubernetes.io/instance-type'] == 'p5.48xlarge'`)."""
    image: str = ""
    """On a cluster: dsx's workload image (dsx[collectives], torch with CUDA), which the builtin worker
    runs in where the cluster has no Kubeflow Trainer; on Trainer the catalog's images per program and
    fabric run. Required there for `recertify` and `validation` to act; `sentinel run --image` overrides it."""
    namespace: str = DEFAULT_RUN_NAMESPACE
    """On a cluster: where the certification workloads (TrainJobs) run."""
    interconnect: str = ""
    """On a cluster: the network platform (efa, infiniband, roce, tcpxo…); empty: detected from the nodes."""
    thresholds: Mapping[Metric, str] = field(default_factory=dict)
    """Metric → CEL expression over `value`, replacing the catalog's threshold for every category."""


class KernelLogSource(schema.Section, frozen=True, kw_only=False):
    node: str = ""
    """Required (`from_dict` says so naming the entry)."""
    path: str = ""
    """A log file (kern.log, syslog, dmesg output); empty with `journal` set."""
    journal: bool = False
    driver_version: str = ""
    """The node's NVIDIA driver (575.57.08): picks the NVLink5 IntrInfo layout when the log has no
    NVRM banner; beats the node's labels, loses to the banner."""


class MonitorSettings(schema.Section, frozen=True):
    kernel_logs: tuple[KernelLogSource, ...] = ()
    start_at_end: bool = False
    """First start only (no saved position): skip what the log already holds."""
    poll_interval_seconds: _Positive = 0.1
    kube_objects: bool = True
    """Evaluate node policies (rules/kube_objects.yaml) on every Node change."""
    node_events: bool = True
    """Read Kubernetes Events on Nodes (node-problem-detector's temporary problems) by rules/node_events.yaml."""
    node_events_namespace: str = "default"
    """Where those Events are (node-problem-detector's --event-namespace)."""


class MaintenanceSettings(schema.Section, frozen=True):
    """How MaintenanceRequests are carried out (dsx.health.decisions.maintenance)."""

    lead_seconds: _AtLeastZero = 900.0
    """Cordon and drain begin this long before a request's startTime (its spec.leadSeconds beats this)."""
    poll_seconds: _Positive = 5.0
    """How often requests are read again (sooner when one is due)."""


class DeadLetterSettings(schema.Section, frozen=True):
    max_attempts: _AtLeastOne = 5
    """Failed attempts of one event in one stage before it is parked as a dead letter."""


@dataclass(frozen=True)
class SentinelPolicy:
    source: str = "<defaults>"
    dry_run: bool = False
    stages: Mapping[Stage, StageSwitch] = field(default_factory=dict)
    gpu_node_selector: Mapping[str, str] = field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    quarantine: QuarantineSettings = field(default_factory=QuarantineSettings)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    remediation: RemediationSettings = field(default_factory=RemediationSettings)
    certification: CertificationSettings = field(default_factory=CertificationSettings)
    monitors: MonitorSettings = field(default_factory=MonitorSettings)
    dead_letter: DeadLetterSettings = field(default_factory=DeadLetterSettings)
    maintenance: MaintenanceSettings = field(default_factory=MaintenanceSettings)
    analyzer_rules: str = ""
    """A rules file (kind AnalyzerRules); empty: the catalog's."""

    def switch(self, stage: Stage) -> StageSwitch:
        """The stage's effective switch (the global dry run folded in)."""
        own = self.stages.get(stage, StageSwitch(enabled=stage not in CLUSTER_CHANGING))
        return StageSwitch(own.enabled, own.dry_run or self.dry_run)

    def with_overrides(self, *, enable: Iterable[Stage] = (), dry_run: bool = False) -> SentinelPolicy:
        """`--enable STAGES` turns stages on; `--dry-run` makes every stage a dry run."""
        stages = dict(self.stages)
        for stage in enable:
            stages[stage] = StageSwitch(True, stages.get(stage, StageSwitch()).dry_run)
        return dataclasses.replace(self, stages=stages, dry_run=self.dry_run or dry_run)


def parse_stages(text: str, *, source: str = "--enable") -> list[Stage]:
    """`quarantine,drain` → stages; unknown names are bad input listing the allowed ones."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item not in {s.value for s in Stage}:
            raise BadInputError(allowed_values_message(source, "stage", item, [s.value for s in Stage]))
        out.append(Stage(item))
    return out


def default() -> SentinelPolicy:
    """The shipped default policy (`dsx.files.health_files` reads a policy file a user names)."""
    return from_dict(catalog.mapping(*DEFAULT_PARTS), source=str(DEFAULT_PATH))


# -- the document ---------------------------------------------------------------------------------
# The schema of the file (camelCase keys, as Kubernetes config kinds such as KubeletConfiguration);
# `from_dict` decodes it with msgspec, then checks what a schema cannot say and builds the
# settings above (compiled CEL, enums, the shipped rule sets where the file names none).


class _SwitchDoc(schema.Section, frozen=True):
    enabled: bool | None = None
    dry_run: bool = False


class _StagesDoc(schema.Section, frozen=True):
    analyzer: _SwitchDoc = _SwitchDoc()
    quarantine: _SwitchDoc = _SwitchDoc()
    drain: _SwitchDoc = _SwitchDoc()
    remediation: _SwitchDoc = _SwitchDoc()
    recertify: _SwitchDoc = _SwitchDoc()
    validation: _SwitchDoc = _SwitchDoc()
    maintenance: _SwitchDoc = _SwitchDoc()


class _TaintDoc(schema.Section, frozen=True):
    key: _NonEmpty
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


class _MatchDoc(schema.Section, frozen=True):
    all: tuple[_NonEmpty, ...] = ()
    any: tuple[_NonEmpty, ...] = ()


class _RuleSetDoc(schema.Section, frozen=True):
    name: _NonEmpty
    match: _MatchDoc = _MatchDoc()
    cordon: bool = True
    taints: tuple[_TaintDoc, ...] = ()
    labels: dict[str, str] = msgspec.field(default_factory=dict)


class _OptOutDoc(schema.Section, frozen=True):
    key: str = nodes.DEFAULT_OPT_OUT_LABEL
    value: str = "false"


class _QuarantineDoc(schema.Section, frozen=True):
    rule_sets: list[_RuleSetDoc] | msgspec.UnsetType = msgspec.UNSET
    opt_out_label: _OptOutDoc = _OptOutDoc()


class _RemediationDoc(schema.Section, frozen=True):
    provider: ProviderSettings = ProviderSettings()
    actions: dict[str, str] | None = None
    """Checked after decoding, so an unknown action or request lists the allowed ones."""


class _CategoryDoc(schema.Section, frozen=True):
    name: _NonEmpty
    scale: Scale | None = None


class _CertificationDoc(schema.Section, frozen=True):
    categories: Annotated[list[str | _CategoryDoc], msgspec.Meta(min_length=1)] | msgspec.UnsetType = msgspec.UNSET
    group_categories: list[_NonEmpty] = msgspec.field(
        default_factory=lambda: list(CertificationSettings.group_categories)
    )
    group_peers: Annotated[int, msgspec.Meta(ge=0)] = CertificationSettings.group_peers
    ranks_per_node: Annotated[int, msgspec.Meta(ge=1)] = CertificationSettings.ranks_per_node
    run_timeout_seconds: _Positive = CertificationSettings.run_timeout_seconds
    stall_timeout_seconds: _Positive = CertificationSettings.stall_timeout_seconds
    max_running: Annotated[int, msgspec.Meta(ge=1)] = CertificationSettings.max_running
    inject: dict[str, str] = msgspec.field(default_factory=dict)
    taint: _TaintDoc | None = None
    joining_batch_seconds: _AtLeastZero = CertificationSettings.joining_batch_seconds
    joining_selector: str = ""
    image: str = ""
    namespace: str = DEFAULT_RUN_NAMESPACE
    interconnect: str = ""
    thresholds: dict[str, str] = msgspec.field(default_factory=dict)


class _AnalyzerDoc(schema.Section, frozen=True):
    rules: str = ""


class PolicyDocument(schema.Section, frozen=True):
    """The SentinelPolicy file as written (docs/sentinel.md); `from_dict` turns it into a SentinelPolicy."""

    api_version: str
    kind: str
    dry_run: bool = False
    stages: _StagesDoc = _StagesDoc()
    gpu_node_selector: dict[str, str] = msgspec.field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    quarantine: _QuarantineDoc = _QuarantineDoc()
    breaker: BreakerSettings = BreakerSettings()
    drain: DrainSettings = DrainSettings()
    remediation: _RemediationDoc = _RemediationDoc()
    certification: _CertificationDoc = _CertificationDoc()
    monitors: MonitorSettings = MonitorSettings()
    dead_letter: DeadLetterSettings = DeadLetterSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    analyzer: _AnalyzerDoc = _AnalyzerDoc()


def from_dict(data: Mapping[str, Any], *, source: str) -> SentinelPolicy:
    """The policy in `data` (camelCase; old snake_case keys are read and warned about once each)."""
    doc = schema.document(data, PolicyDocument, api_version=API_VERSION, kind_name=KIND, source=source, log=log)
    return SentinelPolicy(
        source=source,
        dry_run=doc.dry_run,
        stages={stage: _switch(stage, getattr(doc.stages, stage.value)) for stage in Stage},
        gpu_node_selector=dict(doc.gpu_node_selector),
        quarantine=_quarantine(doc.quarantine, source),
        breaker=doc.breaker,
        drain=doc.drain,
        remediation=_remediation(doc.remediation, f"{source}.remediation"),
        certification=_certification(doc.certification, f"{source}.certification"),
        monitors=_monitors(doc.monitors, f"{source}.monitors"),
        dead_letter=doc.dead_letter,
        maintenance=doc.maintenance,
        analyzer_rules=doc.analyzer.rules,
    )


def _switch(stage: Stage, doc: _SwitchDoc) -> StageSwitch:
    enabled = doc.enabled if doc.enabled is not None else stage not in CLUSTER_CHANGING
    return StageSwitch(enabled=enabled, dry_run=doc.dry_run)


def _taint(doc: _TaintDoc) -> Taint:
    return Taint(doc.key, doc.effect, doc.value)


def _quarantine(doc: _QuarantineDoc, source: str) -> QuarantineSettings:
    label = (doc.opt_out_label.key, doc.opt_out_label.value)
    if isinstance(doc.rule_sets, msgspec.UnsetType):
        shipped = () if source == str(DEFAULT_PATH) else default().quarantine.rule_sets
        return QuarantineSettings(rule_sets=shipped, opt_out_label=label)
    where = f"{source}.quarantine.ruleSets"
    rule_sets = [_rule_set(item, f"{where}[{i}]") for i, item in enumerate(doc.rule_sets)]
    names = [r.name for r in rule_sets]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise BadInputError(f"{where}: rule set name {duplicate!r} is used twice")
    return QuarantineSettings(rule_sets=tuple(rule_sets), opt_out_label=label)


def _rule_set(doc: _RuleSetDoc, where: str) -> RuleSet:
    all_of = [_condition(src, f"{where}.match.all[{i}]") for i, src in enumerate(doc.match.all)]
    any_of = [_condition(src, f"{where}.match.any[{i}]") for i, src in enumerate(doc.match.any)]
    if not all_of and not any_of:
        raise BadInputError(f"{where}.match: give at least one condition under all or any")
    return RuleSet(
        name=doc.name,
        match_all=tuple(all_of),
        match_any=tuple(any_of),
        cordon=doc.cordon,
        taints=tuple(_taint(t) for t in doc.taints),
        labels=dict(doc.labels),
    )


def _condition(source: str, where: str) -> cel.Program:
    return event_rule(source, RULE_VARIABLES, where=where, log=log)


def _remediation(doc: _RemediationDoc, where: str) -> RemediationSettings:
    provider = doc.provider
    if provider.kind is ProviderKind.SCRIPT and not provider.command:
        raise BadInputError(f"{where}.provider.command: the script provider needs an argument list")
    if provider.kind is ProviderKind.WEBHOOK and not provider.url.startswith(("https://", "http://")):
        raise BadInputError(f"{where}.provider.url: the webhook provider needs an http(s) URL")
    actions = dict(DEFAULT_ACTIONS)
    if doc.actions is not None:
        actions = {}
        names = [a.name for a in RecommendedAction]
        kinds = [k.value for k in RemediationKind]
        for key, value in doc.actions.items():
            if key not in names:
                raise BadInputError(allowed_values_message(f"{where}.actions", "action", key, names))
            if value not in kinds:
                raise BadInputError(allowed_values_message(f"{where}.actions.{key}", "request", value, kinds))
            actions[RecommendedAction[key]] = RemediationKind(value)
    return RemediationSettings(provider=provider, actions=actions)


def _certification(doc: _CertificationDoc, where: str) -> CertificationSettings:
    from dsx.model import certify_catalog as certify_catalog

    defaults = CertificationSettings()
    categories = defaults.categories
    if not isinstance(doc.categories, msgspec.UnsetType):
        categories = tuple(
            CategoryChoice(c) if isinstance(c, str) else CategoryChoice(c.name, c.scale) for c in doc.categories
        )
    known = certify_catalog.names()
    for name in [c.name for c in categories] + list(doc.group_categories):
        if name not in known:
            raise BadInputError(allowed_values_message(f"{where}.categories", "category", name, known))
    faults = [k.value for k in FaultKind]
    for node, kind in doc.inject.items():
        if kind not in faults:
            raise BadInputError(allowed_values_message(f"{where}.inject", node, kind, faults))
    metrics = [m.value for m in Metric]
    for metric, expression in doc.thresholds.items():
        if metric not in metrics:
            raise BadInputError(allowed_values_message(f"{where}.thresholds", "metric", metric, metrics))
        cel.compile_expression(expression, ("value", "reference"), origin=f"{where}.thresholds.{metric}")
    if not _DNS_LABEL.match(doc.namespace):
        raise BadInputError(f"{where}.namespace: {doc.namespace!r} is not a namespace name (a DNS label)")
    if doc.joining_selector:
        cel.compile_expression(doc.joining_selector, ("node",), origin=f"{where}.joiningSelector")
    return CertificationSettings(
        categories=categories,
        group_categories=tuple(doc.group_categories),
        group_peers=doc.group_peers,
        ranks_per_node=doc.ranks_per_node,
        run_timeout_seconds=doc.run_timeout_seconds,
        stall_timeout_seconds=doc.stall_timeout_seconds,
        max_running=doc.max_running,
        inject={node: FaultKind(kind) for node, kind in doc.inject.items()},
        taint=_taint(doc.taint) if doc.taint is not None else defaults.taint,
        joining_batch_seconds=doc.joining_batch_seconds,
        joining_selector=doc.joining_selector,
        image=doc.image,
        namespace=doc.namespace,
        interconnect=doc.interconnect,
        thresholds={Metric(m): e for m, e in doc.thresholds.items()},
    )


def _monitors(doc: MonitorSettings, where: str) -> MonitorSettings:
    if not _DNS_LABEL.match(doc.node_events_namespace):
        raise BadInputError(f"{where}.nodeEventsNamespace: {doc.node_events_namespace!r} is not a namespace name")
    for index, own in enumerate(doc.kernel_logs):
        at = f"{where}.kernelLogs[{index}]"
        if own.driver_version:
            xid.parse_driver_version(own.driver_version, "configuration", f"{at}.driverVersion")
        if not own.node:
            raise BadInputError(f"{at}.node: expected the node name")
        if bool(own.path) == own.journal:
            raise BadInputError(f"{at}: give either path or journal: true")
    return doc
