"""Pick the thresholds that apply to one category's runs and judge a measurement against them.

Selection, per metric: an explicit override (certification or recipe) wins; otherwise the most
specific published figure measured on the same workload, accelerator and interconnect (and
scale, where the rule names one; first listed on a tie). A published figure never judges
another workload: Megatron's TFLOP/s do not judge dsx's builtin worker, nccl-tests' bus
bandwidth does not judge a torch loop. A metric without a fitting figure is judged against
its peers of the same round (`peerThresholds`), and the selection says which (workload,
accelerator, interconnect) lacked one. Local CPU runs use the category's local rules, which
compare with the round's peers and this machine's calibration.

Evaluation reports measured and expected values: for `value >= X`, `value <= X` (or such
bounds joined by `&&`) the expected value is the bound that failed, evaluated with the same
bindings; for anything else only the expression is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dsx import cel
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

_BOUND = re.compile(r"^\s*value\s*(>=|>|<=|<)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Context:
    """What a threshold may depend on."""

    workload: str = ""  # Category.workload_id of what runs
    accelerator: str = ""
    interconnect: str = ""
    scale: model.Scale = model.Scale.FULL_SCALE
    local: bool = False


@dataclass(frozen=True)
class Applied:
    metric: model.Metric
    expression: str
    source: str
    measured_on: str = ""  # MeasuredOn.describe() of a published figure; "" for relative rules and overrides

    @property
    def relative(self) -> bool:
        return any(name in self.expression for name in catalog.RELATIVE_VARIABLES)


@dataclass(frozen=True)
class Selection:
    applied: Mapping[model.Metric, Applied] = field(default_factory=dict)
    lacking: str = ""
    """"" when a published figure judges every metric that has a rule; else which one is missing."""


def select(
    category: catalog.Category, context: Context, overrides: Mapping[model.Metric, str]
) -> dict[model.Metric, Applied]:
    return dict(choose(category, context, overrides).applied)


def choose(category: catalog.Category, context: Context, overrides: Mapping[model.Metric, str]) -> Selection:
    args = (context.workload, context.accelerator, context.interconnect, context.scale)
    if context.local:
        chosen = _most_specific(r for r in category.local_thresholds if r.fits(*args))
        lacking = ""
    else:
        chosen = _most_specific(r for r in category.thresholds if r.fits(*args))
        peers = _most_specific(r for r in category.peer_thresholds if r.fits(*args))
        missing = sorted(m for m in peers if m not in chosen and m not in overrides)
        chosen = {**peers, **chosen}
        lacking = ""
        if missing:
            lacking = (
                f"no published {', '.join(m.value for m in missing)} figure for ({context.workload}, "
                f"{context.accelerator or 'unknown accelerator'}, {context.interconnect or 'unknown interconnect'}): "
                "judged against the peers of each round"
            )
    applied = {
        m: Applied(m, r.expression, r.source, r.measured_on.describe() if r.measured_on.workload else "")
        for m, r in chosen.items()
    }
    for metric, expression in overrides.items():
        cel.compile_expression(expression, catalog.CEL_VARIABLES, origin=f"thresholds.{metric.value}")
        applied[metric] = Applied(metric, expression, "override")
    return Selection(dict(sorted(applied.items())), lacking)


def _most_specific(rules: Iterable[catalog.ThresholdRule]) -> dict[model.Metric, catalog.ThresholdRule]:
    chosen: dict[model.Metric, catalog.ThresholdRule] = {}
    for rule in rules:
        best = chosen.get(rule.metric)
        if best is None or rule.specificity > best.specificity:
            chosen[rule.metric] = rule
    return chosen


def judge(applied: Applied, value: float, reference: float | None, peers: float | None = None) -> model.Failure | None:
    """None when the measurement passes; otherwise a threshold-violation failure.

    A relative rule whose comparison value is missing (no calibration, no peer in the round)
    cannot judge: None, and the category says it was informational for that run."""
    bindings = {
        "value": float(value),
        "reference": None if reference is None else float(reference),
        "peers": None if peers is None else float(peers),
    }
    if ("reference" in applied.expression and reference is None) or ("peers" in applied.expression and peers is None):
        return None
    program = cel.compile_expression(applied.expression, catalog.CEL_VARIABLES, origin=applied.metric.value)
    if program.test(bindings):
        return None
    operator, expected = _violated_bound(applied.expression, bindings)
    wanted = f"{operator} {_fmt(expected)}" if operator and expected is not None else applied.expression
    return model.Failure(
        reason=model.Reason.THRESHOLD_VIOLATION,
        message=f"{applied.metric.value} measured {_fmt(value)}, expected {wanted} ({applied.expression})",
        metric=applied.metric,
        measured=float(value),
        expected=expected,
        expression=applied.expression,
    )


def expected_value(expression: str, reference: float | None, peers: float | None = None) -> float | None:
    """The bound X of `value OP X` (the first one, for bounds joined by `&&`), evaluated."""
    parts = _bounds(expression)
    if not parts:
        return None
    return _evaluate(parts[0][1], {"value": 0.0, "reference": reference, "peers": peers})


def _violated_bound(expression: str, bindings: Mapping[str, float | None]) -> tuple[str, float | None]:
    """The operator and value of the first `value OP X` part the measurement misses."""
    for operator, bound in _bounds(expression):
        expected = _evaluate(bound, bindings)
        if expected is None:
            continue
        value = bindings["value"] or 0.0
        holds = {">=": value >= expected, ">": value > expected, "<=": value <= expected, "<": value < expected}
        if not holds[operator]:
            return operator, expected
    return "", None


def _bounds(expression: str) -> list[tuple[str, str]]:
    found = []
    for part in expression.split("&&"):
        bound = _BOUND.match(part)
        if not bound:
            return []
        found.append((bound.group(1), bound.group(2)))
    return found


def _evaluate(bound: str, bindings: Mapping[str, float | None]) -> float | None:
    program = cel.compile_expression(bound, catalog.CEL_VARIABLES, origin="threshold bound")
    try:
        result = program.evaluate({**bindings, "value": 0.0})
    except cel.CelEvaluationError:
        return None
    return float(result) if isinstance(result, int | float) and not isinstance(result, bool) else None


def _fmt(number: float) -> str:
    return f"{number:.4g}" if abs(number) < 1 else f"{number:.2f}"
