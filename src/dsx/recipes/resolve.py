"""Criteria → recipe: match overlays, apply them in a fixed order, merge, sort, digest.

Matching and order are decided in docs/adr/0002: an overlay matches when each criterion it
names equals the query's; matched overlays (with their base chains, which are always more
generic) apply from fewer criteria to more, ties broken by dimension rank and then by name.
Every step is a pure function of the catalog and the criteria, so the recipe is byte-identical
across runs.

The work happens on the compiled catalog (`dsx.recipes.compiled`: plain data in recipe shapes)
and yields the recipe document itself (`document`), which `dsx recipe` writes as it is;
`resolve` reads that document into a `Recipe` for everyone else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsx import __version__, serialization
from dsx.errors import BadInputError, CatalogError
from dsx.model import dimensions
from dsx.recipes import compiled, graph, merge

if TYPE_CHECKING:
    from dsx.model.criteria import Criteria
    from dsx.model.recipe import Recipe
    from dsx.recipes.catalog import Catalog, Overlay

_Compiled = Mapping[str, Any]

GENERATOR = f"dsx/{__version__}"


def _compiled(catalog: Catalog | None) -> _Compiled:
    return compiled.load() if catalog is None else catalog.compiled


def matching_overlays(catalog: Catalog, query: Criteria) -> list[Overlay]:
    """Matched overlays and their base chains, in application order."""
    return [catalog.by_name[o["name"]] for o in _matching(catalog.compiled, query.to_dict())]


def _matching(catalog: _Compiled, query: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    by_name = {o["name"]: o for o in catalog["overlays"]}
    applied: dict[str, Mapping[str, Any]] = {}
    for overlay in catalog["overlays"]:  # already in application order
        if all(query.get(d, dimensions.ANY) == v for d, v in overlay["criteria"].items()):
            for member in overlay["chain"]:
                applied.setdefault(member, by_name[member])
    return list(applied.values())


def unvalidated_criteria(query: Mapping[str, Any], applied: list[Mapping[str, Any]]) -> list[str]:
    """Requested dimensions that no applied overlay validates together with the others (table order).

    The most specific applied overlay is the validated part of the request. A generic overlay
    (one dimension) validates a one-dimension request only: `gke` + `h100` + `training` applied
    side by side say nothing about the three together, so all three are reported.
    """
    requested = [d for d in dimensions.DIMENSIONS if query.get(d, dimensions.ANY) != dimensions.ANY]
    needed = min(2, len(requested))
    validating = [o for o in applied if len(o["criteria"]) >= needed]
    covered = validating[-1]["criteria"] if validating else {}
    return [d for d in requested if d not in covered]


def criteria_document(query: Mapping[str, Any]) -> dict[str, Any]:
    """All five dimensions (`any` when unset) and `nodes` when given, in table order (`Criteria.to_dict`)."""
    out: dict[str, Any] = {d: query.get(d) or dimensions.ANY for d in dimensions.DIMENSIONS}
    if query.get(dimensions.NODES) is not None:
        out[dimensions.NODES] = query[dimensions.NODES]
    return out


def document(query: Mapping[str, Any], catalog: _Compiled | None = None) -> dict[str, Any]:
    """The recipe document (what `dsx recipe` writes, digest included) for normalized criteria `query`
    from the compiled `catalog` (the shipped one by default)."""
    catalog = catalog if catalog is not None else compiled.load()
    criteria = criteria_document(query)
    applied = _matching(catalog, criteria)
    state = _State(catalog)
    for overlay in applied:
        state.apply(overlay)
    refs = state.component_refs()
    order = graph.deployment_order(
        {r["name"]: r["dependencyRefs"] for r in refs}, source=f"overlays {', '.join(o['name'] for o in applied)}"
    )
    out: dict[str, Any] = {
        "apiVersion": catalog["recipeApiVersion"],
        "kind": catalog["recipeKind"],
        "metadata": {
            "name": dimensions.recipe_name(criteria),
            "generator": GENERATOR,
            "criteria": criteria,
            "overlays": [o["name"] for o in applied],
            "unvalidatedCriteria": unvalidated_criteria(criteria, applied),
        },
        "constraints": state.sorted_constraints(),
        "componentRefs": refs,
    }
    certification = {k: state.certification[k] for k in catalog["certificationFields"] if k in state.certification}
    if certification:
        out["certification"] = certification
    out["deploymentOrder"] = order
    out["metadata"]["digest"] = serialization.digest(out)  # the content without the digest, which goes last
    return out


def resolve(query: Criteria, catalog: Catalog | None = None) -> Recipe:
    """The recipe for `query` (with its digest) from `catalog` (the shipped one by default, as in `document`)."""
    from dsx.model.recipe import Recipe

    return Recipe.from_dict(document(query.to_dict(), _compiled(catalog)), source=query.name())


def require_validated(recipe: Recipe, catalog: Catalog | None = None) -> None:
    """`--strict`: a combination without its own overlay is bad input listing the supported ones."""
    meta = recipe.metadata
    check_validated(meta.name, meta.criteria, meta.unvalidated_criteria, catalog)


def check_validated(
    name: str,
    criteria: Mapping[str, Any],
    unvalidated: list[str] | tuple[str, ...],
    catalog: Catalog | None = None,
) -> None:
    """`require_validated` on the parts of a recipe document (`dsx recipe` writes the document, no `Recipe`)."""
    if not unvalidated:
        return
    listed = ", ".join(f"{d}={criteria[d]}" for d in unvalidated)
    raise BadInputError(
        f"--strict: {name} is not a validated combination (unvalidated: {listed}); "
        f"supported: any single criterion, or one of {', '.join(_compiled(catalog)['supported'])}"
    )


class _Working:
    """A component while overlays are applied: registry defaults, then each patch."""

    __slots__ = ("dependency_refs", "enabled", "health_check_asserts", "manifests", "scalars", "values")

    def __init__(self, registry: Mapping[str, Any]) -> None:
        self.scalars: dict[str, str] = dict(registry["scalars"])
        self.values: dict[str, Any] = merge.copy_tree(registry["values"])
        self.dependency_refs: list[str] = registry["dependencyRefs"]
        self.health_check_asserts: list[dict[str, Any]] = registry["healthCheckAsserts"]
        self.manifests: dict[str, str] = dict(registry["manifests"])
        self.enabled = True

    def apply(self, patch: Mapping[str, Any]) -> None:
        self.scalars.update(patch["scalars"])
        if patch["values"] is not None:
            merge.merge_into(self.values, patch["values"])
        if patch["dependencyRefs"] is not None:
            self.dependency_refs = patch["dependencyRefs"]
        if patch["healthCheckAsserts"] is not None:
            self.health_check_asserts = patch["healthCheckAsserts"]
        if patch["manifests"] is not None:
            self.manifests.update(patch["manifests"])
        if patch["enabled"] is not None:
            self.enabled = patch["enabled"]

    def to_ref(self, name: str) -> dict[str, Any]:
        """The componentRef as a recipe writes it (`ComponentRef.to_dict`)."""
        scalars = self.scalars
        namespace = scalars["namespace"]
        out: dict[str, Any] = {"name": name, "type": scalars["type"]}
        for key in ("chart", "source", "path"):
            if scalars[key]:
                out[key] = scalars[key]
        out["namespace"] = namespace
        out["version"] = scalars["version"]
        out["values"] = self.values
        out["dependencyRefs"] = list(self.dependency_refs)
        out["healthCheckAsserts"] = [
            {k: namespace if k == "namespace" and v == compiled.NAMESPACE else merge.copy_tree(v) for k, v in a.items()}
            for a in self.health_check_asserts
        ]
        out["manifests"] = dict(sorted(self.manifests.items()))
        return out


class _State:
    def __init__(self, catalog: _Compiled) -> None:
        self.registry: Mapping[str, Any] = catalog["components"]
        self.components: dict[str, _Working] = {}
        self.constraints: dict[tuple[str, str], dict[str, str]] = {}
        self.certification: dict[str, Any] = {}
        self.deferred: dict[str, list[Mapping[str, Any]]] = {}

    def apply(self, overlay: Mapping[str, Any]) -> None:
        for constraint in overlay["constraints"]:
            self.constraints[(constraint["name"], constraint["operator"])] = constraint
        for patch in overlay["components"]:
            name = patch["name"]
            working = self.components.get(name)
            if working is None:
                if patch["ifIncluded"]:
                    # held back until an overlay includes the component; replayed in order then
                    self.deferred.setdefault(name, []).append(patch)
                    continue
                registry = self.registry.get(name)
                if registry is None:
                    raise CatalogError(f"{overlay['source']}: component {name!r} is not in the registry")
                working = self.components[name] = _Working(registry)
                for earlier in self.deferred.pop(name, []):
                    working.apply(earlier)
            working.apply(patch)
        if overlay["certification"]:
            self._merge_certification(overlay["certification"])

    def _merge_certification(self, layer: Mapping[str, Any]) -> None:
        """Categories merge by name in first-seen order; thresholds deep-merge; scalars replace."""
        if "categories" in layer:
            by_name: dict[str, dict[str, Any]] = {}
            for entry in [*self.certification.get("categories", []), *layer["categories"]]:
                entry = {"name": entry} if isinstance(entry, str) else entry
                current = by_name.setdefault(entry["name"], {"name": entry["name"]})
                merge.merge_into(current, entry)
            self.certification["categories"] = [e["name"] if len(e) == 1 else e for e in by_name.values()]
        if "thresholds" in layer:
            self.certification["thresholds"] = merge.deep_merge(
                self.certification.get("thresholds", {}), layer["thresholds"]
            )
        for key in ("accelerator", "interconnect"):
            if key in layer:
                self.certification[key] = layer[key]

    def component_refs(self) -> list[dict[str, Any]]:
        return [w.to_ref(name) for name, w in sorted(self.components.items()) if w.enabled]

    def sorted_constraints(self) -> list[dict[str, str]]:
        return [dict(self.constraints[k]) for k in sorted(self.constraints)]
