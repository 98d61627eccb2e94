"""The sentinel's configuration file (kind SentinelPolicy): stage switches, rules and knobs.

Why one file: an operator reviews one document to know what the sentinel may do to a fleet.
Stages that change the cluster (quarantine, drain, remediation, recertify, validation) are
OFF unless the file (or `--enable`) turns them on, as NVSentinel ships observing only; a stage
that is off records `stage-disabled` for each event and does nothing else. A global `dry_run`
and a per-stage `dry_run` make an enabled stage record what it would do without touching the
cluster or the node states (so the stages after it stay idle: to see the whole chain without
acting, use `dsx sentinel replay`).

Keys are snake_case like the other `dsx.health/v1alpha1` kinds; units are in the names. Every
error names the file and the field. A section left out takes the shipped defaults (a policy
without `quarantine.rule_sets` uses the shipped rule sets; `rule_sets: []` means none). The default policy is data:
`src/dsx/catalog/rules/sentinel-default.yaml`. Reference: docs/sentinel.md.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsx import catalog, cel, serialization
from dsx.errors import BadInputError, allowed_values_message
from dsx.health import nodes, xid
from dsx.health.ports import RemediationKind, Taint, TaintEffect
from dsx.model.certification import FaultKind, Metric, Scale
from dsx.model.health import RecommendedAction

API_VERSION = "dsx.health/v1alpha1"
KIND = "SentinelPolicy"
DEFAULT_PATH = catalog.path("rules", "sentinel-default.yaml")
RULE_VARIABLES = ("event", "node")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class Stage(enum.StrEnum):
    ANALYZER = "analyzer"
    QUARANTINE = "quarantine"
    DRAIN = "drain"
    REMEDIATION = "remediation"
    RECERTIFY = "recertify"
    VALIDATION = "validation"


PIPELINE = (Stage.QUARANTINE, Stage.DRAIN, Stage.REMEDIATION, Stage.RECERTIFY)
"""The stages an event passes in order; each waits for the one before it."""
CLUSTER_CHANGING = frozenset({*PIPELINE, Stage.VALIDATION})


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


@dataclass(frozen=True)
class BreakerSettings:
    enabled: bool = True
    max_quarantined_percent: float = 10.0
    """Quarantining a node that would put more than this share of GPU nodes in quarantine trips the breaker."""
    window_seconds: float = 1800.0
    """Only quarantines that began within this window count."""


class DrainMode(enum.StrEnum):
    IMMEDIATE = "Immediate"
    """Evict now through the Eviction API; PodDisruptionBudgets are honoured with backoff."""
    ALLOW_COMPLETION = "AllowCompletion"
    """Never evict: wait for the pods to finish."""
    DELETE_AFTER_TIMEOUT = "DeleteAfterTimeout"
    """Wait up to `timeout_seconds` for the pods to finish, then delete them."""


@dataclass(frozen=True)
class NamespaceMode:
    pattern: str
    """Namespace name or glob (`batch-*`)."""
    mode: DrainMode
    timeout_seconds: float = 600.0


@dataclass(frozen=True)
class DrainSettings:
    default_mode: DrainMode = DrainMode.IMMEDIATE
    namespaces: tuple[NamespaceMode, ...] = ()
    """First matching entry wins."""
    system_namespaces: tuple[str, ...] = ("kube-system", "kube-public", "kube-node-lease")
    """Never drained (globs allowed)."""
    evictions_per_second: float = 10.0
    eviction_burst: int = 20
    backoff_seconds: float = 1.0
    """First wait after a PodDisruptionBudget refused an eviction; doubles per refusal."""
    max_backoff_seconds: float = 30.0
    poll_seconds: float = 2.0
    """How often a drain waiting on pods looks again."""
    grace_period_seconds: int | None = None
    """Passed to evictions and deletions; None keeps each pod's own."""


class ProviderKind(enum.StrEnum):
    NONE = "none"
    SIM = "sim"
    SCRIPT = "script"
    WEBHOOK = "webhook"


@dataclass(frozen=True)
class ProviderSettings:
    kind: ProviderKind = ProviderKind.NONE
    command: tuple[str, ...] = ()
    """script: the argument list; {node}, {kind}, {request_id}, {gpus} and {reason} are filled in per argument."""
    url: str = ""
    """webhook: where the request is POSTed as JSON."""
    token_file: str = ""
    """webhook: a file holding the bearer token."""
    timeout_seconds: float = 900.0


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
"""Where certification Jobs run unless `certification.namespace` says otherwise (as `dsx certify run`)."""


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
    image: str = ""
    """On a cluster: the workload image (dsx[collectives], torch with CUDA) the node's pods run.
    Required there for `recertify` and `validation` to act; `sentinel run --image` overrides it."""
    namespace: str = DEFAULT_RUN_NAMESPACE
    """On a cluster: where the certification Jobs run."""
    interconnect: str = ""
    """On a cluster: the network platform (efa, infiniband, roce, tcpxo…); empty: detected from the nodes."""
    thresholds: Mapping[Metric, str] = field(default_factory=dict)
    """Metric → CEL expression over `value`, replacing the catalog's threshold for every category."""


@dataclass(frozen=True)
class KernelLogSource:
    node: str
    path: str = ""
    """A log file (kern.log, syslog, dmesg output); empty with `journal` set."""
    journal: bool = False
    driver_version: str = ""
    """The node's NVIDIA driver (575.57.08): picks the NVLink5 IntrInfo layout when the log has no
    NVRM banner; beats the node's labels, loses to the banner."""


@dataclass(frozen=True)
class MonitorSettings:
    kernel_logs: tuple[KernelLogSource, ...] = ()
    start_at_end: bool = False
    """First start only (no saved position): skip what the log already holds."""
    poll_interval_seconds: float = 0.1
    kube_objects: bool = True
    """Evaluate node policies (rules/kube_objects.yaml) on every Node change."""


@dataclass(frozen=True)
class DeadLetterSettings:
    max_attempts: int = 5
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


def load(path: str | Path | None = None) -> SentinelPolicy:
    """Read a policy file (None: the default policy); every error names the file and field."""
    where = Path(path) if path is not None else DEFAULT_PATH
    return from_dict(serialization.load_mapping_file(where), source=str(where))


# -- parsing -------------------------------------------------------------------------------------


class _Fields:
    """Typed reads from one mapping, with errors naming source and field."""

    def __init__(self, raw: object, where: str, allowed: Iterable[str]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{where}: expected a mapping")
        allowed = tuple(allowed)
        unknown = sorted(str(k) for k in set(raw) - set(allowed))
        if unknown:
            raise BadInputError(allowed_values_message(where, "field", unknown[0], allowed))
        self.raw, self.where = raw, where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}"

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise BadInputError(f"{self.at(key)}: expected true or false, got {value!r}")
        return value

    def number(self, key: str, default: float, *, minimum: float = 0.0, above: bool = False) -> float:
        value = self.raw.get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise BadInputError(f"{self.at(key)}: expected a finite number, got {value!r}")
        if value < minimum or (above and value <= minimum):
            relation = "above" if above else "at least"
            raise BadInputError(f"{self.at(key)}: {value} is out of range; allowed: {relation} {minimum:g}")
        return float(value)

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        value = self.raw.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise BadInputError(f"{self.at(key)}: expected an integer of at least {minimum}, got {value!r}")
        return value

    def text(self, key: str, default: str = "") -> str:
        value = self.raw.get(key, default)
        if not isinstance(value, str):
            raise BadInputError(f"{self.at(key)}: expected a string, got {value!r}")
        return value

    def texts(self, key: str, default: Iterable[str] = ()) -> tuple[str, ...]:
        value = self.raw.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise BadInputError(f"{self.at(key)}: expected a list of non-empty strings")
        return tuple(value)

    def string_map(self, key: str, default: Mapping[str, str] | None = None) -> dict[str, str]:
        value = self.raw.get(key, dict(default or {}))
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise BadInputError(f"{self.at(key)}: expected a mapping of strings to strings")
        return dict(value)

    def choice(self, key: str, kind: type[enum.StrEnum], default: enum.StrEnum) -> Any:
        value = self.raw.get(key, default.value)
        allowed = [member.value for member in kind]
        if value not in allowed:
            raise BadInputError(allowed_values_message(self.where, key, value, allowed))
        return kind(value)

    def section(self, key: str, allowed: Iterable[str]) -> _Fields:
        return _Fields(self.raw.get(key), self.at(key), allowed)


_TOP = (
    "apiVersion",
    "kind",
    "dry_run",
    "stages",
    "gpu_node_selector",
    "quarantine",
    "breaker",
    "drain",
    "remediation",
    "certification",
    "monitors",
    "dead_letter",
    "analyzer",
)


def from_dict(data: Mapping[str, Any], *, source: str) -> SentinelPolicy:
    if not isinstance(data, Mapping):
        raise BadInputError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise BadInputError(f"{source}: expected apiVersion {API_VERSION} and kind {KIND}")
    top = _Fields(data, source, _TOP)
    analyzer = top.section("analyzer", ("rules",))
    return SentinelPolicy(
        source=source,
        dry_run=top.flag("dry_run", False),
        stages=_stages(top.section("stages", [s.value for s in Stage])),
        gpu_node_selector=top.string_map("gpu_node_selector", {"nvidia.com/gpu.present": "true"}),
        quarantine=_quarantine(top.section("quarantine", ("rule_sets", "opt_out_label"))),
        breaker=_breaker(top.section("breaker", ("enabled", "max_quarantined_percent", "window_seconds"))),
        drain=_drain(
            top.section(
                "drain",
                (
                    "default_mode",
                    "namespaces",
                    "system_namespaces",
                    "evictions_per_second",
                    "eviction_burst",
                    "backoff_seconds",
                    "max_backoff_seconds",
                    "poll_seconds",
                    "grace_period_seconds",
                ),
            )
        ),
        remediation=_remediation(top.section("remediation", ("provider", "actions"))),
        certification=_certification(
            top.section(
                "certification",
                (
                    "categories",
                    "group_categories",
                    "group_peers",
                    "ranks_per_node",
                    "run_timeout_seconds",
                    "stall_timeout_seconds",
                    "max_running",
                    "inject",
                    "taint",
                    "image",
                    "namespace",
                    "interconnect",
                    "thresholds",
                ),
            )
        ),
        monitors=_monitors(
            top.section("monitors", ("kernel_logs", "start_at_end", "poll_interval_seconds", "kube_objects"))
        ),
        dead_letter=DeadLetterSettings(
            max_attempts=top.section("dead_letter", ("max_attempts",)).integer("max_attempts", 5, minimum=1)
        ),
        analyzer_rules=analyzer.text("rules"),
    )


def _stages(section: _Fields) -> dict[Stage, StageSwitch]:
    out = {}
    for stage in Stage:
        own = section.section(stage.value, ("enabled", "dry_run"))
        out[stage] = StageSwitch(
            enabled=own.flag("enabled", stage not in CLUSTER_CHANGING), dry_run=own.flag("dry_run", False)
        )
    return out


def _quarantine(section: _Fields) -> QuarantineSettings:
    opt_out = section.section("opt_out_label", ("key", "value"))
    label = (opt_out.text("key", nodes.DEFAULT_OPT_OUT_LABEL), opt_out.text("value", "false"))
    if "rule_sets" not in section.raw:
        shipped = () if section.where == f"{DEFAULT_PATH}.quarantine" else load().quarantine.rule_sets
        return QuarantineSettings(rule_sets=shipped, opt_out_label=label)
    raw_sets = section.raw["rule_sets"]
    if not isinstance(raw_sets, list):
        raise BadInputError(f"{section.at('rule_sets')}: expected a list of rule sets")
    rule_sets = [_rule_set(item, f"{section.at('rule_sets')}[{i}]") for i, item in enumerate(raw_sets)]
    names = [r.name for r in rule_sets]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise BadInputError(f"{section.at('rule_sets')}: rule set name {duplicate!r} is used twice")
    return QuarantineSettings(rule_sets=tuple(rule_sets), opt_out_label=label)


def _rule_set(item: object, where: str) -> RuleSet:
    own = _Fields(item, where, ("name", "match", "cordon", "taints", "labels"))
    name = own.text("name")
    if not name:
        raise BadInputError(f"{own.at('name')}: expected a non-empty string")
    match = own.section("match", ("all", "any"))
    all_of = [_condition(src, f"{match.at('all')}[{i}]") for i, src in enumerate(match.texts("all"))]
    any_of = [_condition(src, f"{match.at('any')}[{i}]") for i, src in enumerate(match.texts("any"))]
    if not all_of and not any_of:
        raise BadInputError(f"{own.at('match')}: give at least one condition under all or any")
    raw_taints = own.raw.get("taints", [])
    if not isinstance(raw_taints, list):
        raise BadInputError(f"{own.at('taints')}: expected a list of {{key, value, effect}}")
    return RuleSet(
        name=name,
        match_all=tuple(all_of),
        match_any=tuple(any_of),
        cordon=own.flag("cordon", True),
        taints=tuple(Taint.from_dict(t, source=f"{own.at('taints')}[{i}]") for i, t in enumerate(raw_taints)),
        labels=own.string_map("labels"),
    )


def _condition(source: str, where: str) -> cel.Program:
    return cel.compile_expression(source, RULE_VARIABLES, origin=where)


def _breaker(section: _Fields) -> BreakerSettings:
    return BreakerSettings(
        enabled=section.flag("enabled", True),
        max_quarantined_percent=section.number("max_quarantined_percent", 10.0, minimum=0.0, above=True),
        window_seconds=section.number("window_seconds", 1800.0, minimum=0.0, above=True),
    )


def _drain(section: _Fields) -> DrainSettings:
    raw = section.raw.get("namespaces", [])
    if not isinstance(raw, list):
        raise BadInputError(f"{section.at('namespaces')}: expected a list of {{match, mode, timeout_seconds}}")
    modes = []
    for index, item in enumerate(raw):
        own = _Fields(item, f"{section.at('namespaces')}[{index}]", ("match", "mode", "timeout_seconds"))
        pattern = own.text("match")
        if not pattern:
            raise BadInputError(f"{own.at('match')}: expected a namespace name or glob")
        modes.append(
            NamespaceMode(
                pattern,
                own.choice("mode", DrainMode, DrainMode.IMMEDIATE),
                own.number("timeout_seconds", 600.0, minimum=0.0),
            )
        )
    grace = section.raw.get("grace_period_seconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool) or grace < 0):
        raise BadInputError(f"{section.at('grace_period_seconds')}: expected an integer of at least 0 or null")
    defaults = DrainSettings()
    return DrainSettings(
        default_mode=section.choice("default_mode", DrainMode, DrainMode.IMMEDIATE),
        namespaces=tuple(modes),
        system_namespaces=section.texts("system_namespaces", defaults.system_namespaces),
        evictions_per_second=section.number("evictions_per_second", 10.0, minimum=0.0, above=True),
        eviction_burst=section.integer("eviction_burst", 20, minimum=1),
        backoff_seconds=section.number("backoff_seconds", 1.0, minimum=0.0, above=True),
        max_backoff_seconds=section.number("max_backoff_seconds", 30.0, minimum=0.0, above=True),
        poll_seconds=section.number("poll_seconds", 2.0, minimum=0.0, above=True),
        grace_period_seconds=grace,
    )


def _remediation(section: _Fields) -> RemediationSettings:
    own = section.section("provider", ("kind", "command", "url", "token_file", "timeout_seconds"))
    provider = ProviderSettings(
        kind=own.choice("kind", ProviderKind, ProviderKind.NONE),
        command=own.texts("command"),
        url=own.text("url"),
        token_file=own.text("token_file"),
        timeout_seconds=own.number("timeout_seconds", 900.0, minimum=0.0, above=True),
    )
    if provider.kind is ProviderKind.SCRIPT and not provider.command:
        raise BadInputError(f"{own.at('command')}: the script provider needs an argument list")
    if provider.kind is ProviderKind.WEBHOOK and not provider.url.startswith(("https://", "http://")):
        raise BadInputError(f"{own.at('url')}: the webhook provider needs an http(s) URL")
    actions = dict(DEFAULT_ACTIONS)
    raw = section.raw.get("actions")
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{section.at('actions')}: expected a mapping of recommended action to request")
        actions = {}
        names = [a.name for a in RecommendedAction]
        kinds = [k.value for k in RemediationKind]
        for key, value in raw.items():
            if key not in names:
                raise BadInputError(allowed_values_message(section.at("actions"), "action", key, names))
            if value not in kinds:
                raise BadInputError(allowed_values_message(f"{section.at('actions')}.{key}", "request", value, kinds))
            actions[RecommendedAction[key]] = RemediationKind(value)
    return RemediationSettings(provider=provider, actions=actions)


def _certification(section: _Fields) -> CertificationSettings:
    from dsx.model import certify_catalog as certify_catalog

    defaults = CertificationSettings()
    raw = section.raw.get("categories")
    categories = defaults.categories
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            raise BadInputError(f"{section.at('categories')}: expected a non-empty list of categories")
        choices = []
        for index, item in enumerate(raw):
            where = f"{section.at('categories')}[{index}]"
            if isinstance(item, str):
                choices.append(CategoryChoice(item))
                continue
            own = _Fields(item, where, ("name", "scale"))
            scale = own.raw.get("scale")
            if scale is not None and scale not in [s.value for s in Scale]:
                raise BadInputError(allowed_values_message(where, "scale", scale, [s.value for s in Scale]))
            choices.append(CategoryChoice(own.text("name"), Scale(scale) if scale else None))
        categories = tuple(choices)
    group = section.texts("group_categories", defaults.group_categories)
    known = certify_catalog.names()
    for name in [c.name for c in categories] + list(group):
        if name not in known:
            raise BadInputError(allowed_values_message(section.at("categories"), "category", name, known))
    inject: dict[str, FaultKind] = {}
    for node, kind in section.string_map("inject").items():
        if kind not in [k.value for k in FaultKind]:
            raise BadInputError(allowed_values_message(section.at("inject"), node, kind, [k.value for k in FaultKind]))
        inject[node] = FaultKind(kind)
    taint = defaults.taint
    if "taint" in section.raw:
        taint = Taint.from_dict(section.raw["taint"], source=section.at("taint"))
    thresholds: dict[Metric, str] = {}
    for metric, expression in section.string_map("thresholds").items():
        if metric not in [m.value for m in Metric]:
            raise BadInputError(
                allowed_values_message(section.at("thresholds"), "metric", metric, [m.value for m in Metric])
            )
        cel.compile_expression(expression, ("value", "reference"), origin=f"{section.at('thresholds')}.{metric}")
        thresholds[Metric(metric)] = expression
    namespace = section.text("namespace", defaults.namespace)
    if not _DNS_LABEL.match(namespace):
        raise BadInputError(f"{section.at('namespace')}: {namespace!r} is not a namespace name (a DNS label)")
    return CertificationSettings(
        categories=categories,
        group_categories=group,
        group_peers=section.integer("group_peers", defaults.group_peers),
        ranks_per_node=section.integer("ranks_per_node", defaults.ranks_per_node, minimum=1),
        run_timeout_seconds=section.number("run_timeout_seconds", defaults.run_timeout_seconds, above=True),
        stall_timeout_seconds=section.number("stall_timeout_seconds", defaults.stall_timeout_seconds, above=True),
        max_running=section.integer("max_running", defaults.max_running, minimum=1),
        inject=inject,
        taint=taint,
        image=section.text("image"),
        namespace=namespace,
        interconnect=section.text("interconnect"),
        thresholds=thresholds,
    )


def _monitors(section: _Fields) -> MonitorSettings:
    raw = section.raw.get("kernel_logs", [])
    if not isinstance(raw, list):
        raise BadInputError(f"{section.at('kernel_logs')}: expected a list of {{node, path}} or {{node, journal}}")
    sources = []
    for index, item in enumerate(raw):
        own = _Fields(item, f"{section.at('kernel_logs')}[{index}]", ("node", "path", "journal", "driver_version"))
        node, path, journal = own.text("node"), own.text("path"), own.flag("journal", False)
        driver_version = own.text("driver_version")
        if driver_version:
            xid.parse_driver_version(driver_version, "configuration", own.at("driver_version"))
        if not node:
            raise BadInputError(f"{own.at('node')}: expected the node name")
        if bool(path) == journal:
            raise BadInputError(f"{own.where}: give either path or journal: true")
        sources.append(KernelLogSource(node, path, journal, driver_version))
    return MonitorSettings(
        kernel_logs=tuple(sources),
        start_at_end=section.flag("start_at_end", False),
        poll_interval_seconds=section.number("poll_interval_seconds", 0.1, above=True),
        kube_objects=section.flag("kube_objects", True),
    )
