"""Every leaf of the catalog with its structural health: what `dsx recipe list` prints.

A leaf is an overlay no other overlay builds on (no `base` names it): the most specific recipe
the catalog validates along its branch. Each gets the checks a catalog maintainer would make by
hand before a user asks for that recipe, so a broken leaf is found in CI rather than in a cluster:

- **resolves**: its criteria resolve, and strictly: every criterion is validated by an overlay;
- **constraints**: every constraint names a fact `dsx validate` measures (the predicate is handed
  in by the entry point, since the facts live in `dsx.validation`);
- **pinned**: every Helm chart has a source, a chart name and an exact version; every Kustomize
  component a source and an exact tag;
- **checks**: every component declares at least one health assert.

Every other overlay with criteria is listed too, marked as no leaf (as AICR's `aicr recipe list`
does). Reports are deterministic: overlays sorted by name, findings in check order, then by
component.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsx.errors import DsxError
from dsx.model.criteria import ANY, parse_criteria
from dsx.model.recipe import ComponentType, Recipe
from dsx.recipes import resolve
from dsx.recipes.catalog import Catalog, Overlay, pin_problem

PASS, FAIL, SKIPPED = "pass", "fail", "skipped"


class Check(enum.StrEnum):
    RESOLVES = "resolves"
    CONSTRAINTS = "constraints"
    CHART_PINNED = "chartPinned"
    CHECKS_DECLARED = "checksDeclared"


@dataclass(frozen=True)
class Finding:
    check: Check
    problem: str
    """What is wrong, naming the component or constraint (`gpu-operator: version 'latest' …`)."""


@dataclass(frozen=True)
class LeafReport:
    name: str
    criteria: dict[str, str]
    source: str
    """The overlay file, relative to the catalog."""
    overlays: tuple[str, ...]
    """What the recipe applied, root first; empty when it did not resolve."""
    components: int
    findings: tuple[Finding, ...]

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def status(self) -> str:
        return PASS if self.passed else FAIL

    def dimension(self, check: Check) -> str:
        """`pass`, `fail`, or `skipped` (a recipe that did not resolve cannot be checked further)."""
        if any(f.check is check for f in self.findings):
            return FAIL
        if check is not Check.RESOLVES and any(f.check is Check.RESOLVES for f in self.findings):
            return SKIPPED
        return PASS

    def to_dict(self) -> dict[str, Any]:
        """The `health` block of a leaf in `dsx recipe list -o json|yaml`."""
        return {
            "status": self.status,
            "dimensions": {check.value: self.dimension(check) for check in Check},
            "overlays": list(self.overlays),
            "components": self.components,
            "findings": [{"check": f.check.value, "problem": f.problem} for f in self.findings],
        }


@dataclass(frozen=True)
class Entry:
    """One overlay of the catalog as `dsx recipe list` shows it: health only on leaves, when asked."""

    name: str
    criteria: dict[str, str]
    source: str
    is_leaf: bool
    health: LeafReport | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "criteria": dict(self.criteria),
            "isLeaf": self.is_leaf,
            "source": self.source,
        }
        if self.health is not None:
            out["health"] = self.health.to_dict()
        return out


def _bases(catalog: Catalog) -> set[str]:
    return {o.base for o in catalog.overlays if o.base}


def leaves(catalog: Catalog) -> list[Overlay]:
    """The overlays no other overlay names as its base (the root, with no criteria, is none), by name."""
    bases = _bases(catalog)
    return sorted((o for o in catalog.overlays if o.criteria and o.name not in bases), key=lambda o: o.name)


def entries(
    catalog: Catalog, *, filters: Mapping[str, str], health: bool, measured: Callable[[str], bool]
) -> list[Entry]:
    """Every overlay with criteria whose criteria equal each filter (`--service eks` matches only
    overlays that name eks: one leaving the service open is not listed; `any` matches those that
    leave it open), by name; leaves carry their health unless `health` is off."""
    bases = _bases(catalog)
    found: list[Entry] = []
    for overlay in sorted(catalog.overlays, key=lambda o: o.name):
        if not overlay.criteria or any(overlay.criteria.get(d, ANY) != v for d, v in filters.items()):
            continue
        leaf = overlay.name not in bases
        checked = report(catalog, overlay, measured=measured) if leaf and health else None
        found.append(Entry(overlay.name, dict(overlay.criteria), _relative(catalog, overlay.source), leaf, checked))
    return found


def report(catalog: Catalog, overlay: Overlay, *, measured: Callable[[str], bool]) -> LeafReport:
    """The four checks on one leaf (see the module docstring)."""
    source = _relative(catalog, overlay.source)
    try:
        query = parse_criteria(overlay.criteria, source=f"{source}: criteria")
        recipe = resolve.resolve(query, catalog)
    except DsxError as exc:
        return LeafReport(overlay.name, dict(overlay.criteria), source, (), 0, (Finding(Check.RESOLVES, str(exc)),))
    findings = [*_resolution(recipe), *_constraints(recipe, measured), *_pins(recipe), *_asserts(recipe)]
    return LeafReport(
        overlay.name,
        dict(overlay.criteria),
        source,
        tuple(recipe.metadata.overlays),
        len(recipe.component_refs),
        tuple(findings),
    )


def report_all(catalog: Catalog, *, measured: Callable[[str], bool]) -> list[LeafReport]:
    return [report(catalog, leaf, measured=measured) for leaf in leaves(catalog)]


def _resolution(recipe: Recipe) -> list[Finding]:
    unvalidated = recipe.metadata.unvalidated_criteria
    if not unvalidated:
        return []
    listed = ", ".join(f"{d}={recipe.metadata.criteria[d]}" for d in unvalidated)
    return [Finding(Check.RESOLVES, f"not validated by an overlay: {listed} (dsx recipe --strict refuses it)")]


def _constraints(recipe: Recipe, measured: Callable[[str], bool]) -> list[Finding]:
    return [
        Finding(Check.CONSTRAINTS, f"{c.expression()}: dsx validate measures no fact {c.name!r}")
        for c in recipe.constraints
        if not measured(c.name)
    ]


def _pins(recipe: Recipe) -> list[Finding]:
    found: list[Finding] = []
    for component in sorted(recipe.component_refs, key=lambda c: c.name):
        wanted: Sequence[tuple[str, str]] = ()
        if component.type is ComponentType.HELM:
            wanted = (("source", component.source), ("chart", component.chart))
        elif component.type is ComponentType.KUSTOMIZE:
            wanted = (("source", component.source),)
        else:
            continue  # manifests are in the recipe itself
        found += [Finding(Check.CHART_PINNED, f"{component.name}: no {field}") for field, value in wanted if not value]
        problem = pin_problem(component.version)
        if problem is not None:
            found.append(Finding(Check.CHART_PINNED, f"{component.name}: version {problem}"))
    return found


def _asserts(recipe: Recipe) -> list[Finding]:
    return [
        Finding(Check.CHECKS_DECLARED, f"{c.name}: no healthCheckAsserts (dsx validate could not tell it runs)")
        for c in sorted(recipe.component_refs, key=lambda c: c.name)
        if not c.health_check_asserts
    ]


def _relative(catalog: Catalog, source: str) -> str:
    root = str(catalog.root).rstrip("/") + "/"
    return source.removeprefix(root)
