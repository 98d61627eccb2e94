"""Pick the thresholds that apply to one run and judge a measurement against them.

Selection: for each metric, an explicit override (certification or recipe) wins; otherwise
the most specific catalog rule that matches the accelerator, interconnect and scale (first
listed on a tie). Local CPU runs use the category's local rules, which compare against a
`reference` measured on this machine instead of a published figure. A metric with no rule
is informational.

Evaluation reports measured and expected values: for `value >= X` / `value <= X` the
expected value is X evaluated with the same bindings; for anything else only the
expression is shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dsx import cel
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

_BOUND = re.compile(r"^\s*value\s*(>=|>|<=|<)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Context:
    """What a threshold may depend on."""

    accelerator: str = ""
    interconnect: str = ""
    scale: model.Scale = model.Scale.FULL_SCALE
    local: bool = False


@dataclass(frozen=True)
class Applied:
    metric: model.Metric
    expression: str
    source: str


def select(
    category: catalog.Category, context: Context, overrides: Mapping[model.Metric, str]
) -> dict[model.Metric, Applied]:
    rules = category.local_thresholds if context.local else category.thresholds
    chosen: dict[model.Metric, catalog.ThresholdRule] = {}
    for rule in rules:
        if not rule.matches(context.accelerator, context.interconnect, context.scale):
            continue
        best = chosen.get(rule.metric)
        if best is None or rule.specificity > best.specificity:
            chosen[rule.metric] = rule
    applied = {m: Applied(m, r.expression, r.source) for m, r in chosen.items()}
    for metric, expression in overrides.items():
        cel.compile_expression(expression, catalog.CEL_VARIABLES, origin=f"thresholds.{metric.value}")
        applied[metric] = Applied(metric, expression, "override")
    return dict(sorted(applied.items()))


def judge(applied: Applied, value: float, reference: float | None) -> model.Failure | None:
    """None when the measurement passes; otherwise a threshold-violation failure."""
    bindings = {"value": float(value), "reference": None if reference is None else float(reference)}
    program = cel.compile_expression(applied.expression, catalog.CEL_VARIABLES, origin=applied.metric.value)
    if program.test(bindings):
        return None
    expected = expected_value(applied.expression, reference)
    bound = _BOUND.match(applied.expression)
    wanted = f"{bound.group(1)} {_fmt(expected)}" if bound and expected is not None else applied.expression
    return model.Failure(
        reason=model.Reason.THRESHOLD_VIOLATION,
        message=f"{applied.metric.value} measured {_fmt(value)}, expected {wanted} ({applied.expression})",
        metric=applied.metric,
        measured=float(value),
        expected=expected,
        expression=applied.expression,
    )


def expected_value(expression: str, reference: float | None) -> float | None:
    """The bound X of `value OP X`, evaluated; None for other shapes of expression."""
    bound = _BOUND.match(expression)
    if not bound:
        return None
    program = cel.compile_expression(bound.group(2), catalog.CEL_VARIABLES, origin="threshold bound")
    try:
        result = program.evaluate({"value": 0.0, "reference": None if reference is None else float(reference)})
    except cel.CelEvaluationError:
        return None
    return float(result) if isinstance(result, int | float) and not isinstance(result, bool) else None


def _fmt(number: float) -> str:
    return f"{number:.4g}" if abs(number) < 1 else f"{number:.2f}"
