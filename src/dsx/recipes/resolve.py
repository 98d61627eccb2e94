"""Criteria → recipe: match overlays, apply them in a fixed order, merge, sort, digest.

Matching and order are decided in docs/adr/0002: an overlay matches when each criterion it
names equals the query's; matched overlays (with their base chains, which are always more
generic) apply from fewer criteria to more, ties broken by dimension rank and then by name.
Every step is a pure function of the catalog and the criteria, so the recipe is byte-identical
across runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsx import __version__
from dsx.errors import BadInputError, CatalogError
from dsx.model import constraints as constraint_model
from dsx.model import criteria as criteria_model
from dsx.model.recipe import ComponentRef, ComponentType, Recipe, RecipeMetadata
from dsx.recipes import graph, merge
from dsx.recipes.catalog import CERTIFICATION_FIELDS, Catalog, ComponentPatch, Overlay
from dsx.recipes.catalog import load as load_catalog

GENERATOR = f"dsx/{__version__}"


def matching_overlays(catalog: Catalog, query: criteria_model.Criteria) -> list[Overlay]:
    """Matched overlays and their base chains, in application order."""
    applied: dict[str, Overlay] = {}
    for overlay in catalog.overlays:  # already in application order
        if overlay.matches(query):
            for member in catalog.chain(overlay.name):
                applied.setdefault(member.name, member)
    return list(applied.values())


def unvalidated_criteria(query: criteria_model.Criteria, applied: list[Overlay]) -> list[str]:
    """Requested dimensions that no applied overlay validates together with the others (table order).

    The most specific applied overlay is the validated part of the request. A generic overlay
    (one dimension) validates a one-dimension request only: `gke` + `h100` + `training` applied
    side by side say nothing about the three together, so all three are reported.
    """
    requested = query.specified()
    needed = min(2, len(requested))
    validating = [o for o in applied if len(o.criteria) >= needed]
    covered = validating[-1].criteria if validating else {}
    return [d for d in requested if d not in covered]


def resolve(query: criteria_model.Criteria, catalog: Catalog | None = None) -> Recipe:
    """The recipe for `query` (with its digest) from `catalog` (the shipped one by default)."""
    catalog = catalog if catalog is not None else load_catalog()
    applied = matching_overlays(catalog, query)
    state = _State()
    for overlay in applied:
        state.apply(overlay, catalog)
    refs = state.component_refs()
    order = graph.deployment_order(
        {r.name: r.dependency_refs for r in refs}, source=f"overlays {', '.join(o.name for o in applied)}"
    )
    recipe = Recipe(
        metadata=RecipeMetadata(
            name=query.name(),
            generator=GENERATOR,
            criteria=query.to_dict(),
            overlays=tuple(o.name for o in applied),
            unvalidated_criteria=tuple(unvalidated_criteria(query, applied)),
        ),
        constraints=state.sorted_constraints(),
        component_refs=tuple(refs),
        deployment_order=tuple(order),
        certification={k: state.certification[k] for k in CERTIFICATION_FIELDS if k in state.certification} or None,
        source=query.name(),
    )
    return recipe.with_digest()


def require_validated(recipe: Recipe, catalog: Catalog | None = None) -> None:
    """`--strict`: a combination without its own overlay is bad input listing the supported ones."""
    if not recipe.metadata.unvalidated_criteria:
        return
    catalog = catalog if catalog is not None else load_catalog()
    criteria = recipe.metadata.criteria
    unvalidated = ", ".join(f"{d}={criteria[d]}" for d in recipe.metadata.unvalidated_criteria)
    raise BadInputError(
        f"--strict: {recipe.metadata.name} is not a validated combination (unvalidated: {unvalidated}); "
        f"supported: any single criterion, or one of {', '.join(catalog.supported_combinations())}"
    )


@dataclass
class _Working:
    """A component while overlays are applied: registry defaults, then each patch."""

    scalars: dict[str, str]
    values: dict[str, Any]
    dependency_refs: tuple[str, ...]
    health_check_asserts: tuple[Any, ...]
    manifests: dict[str, str]
    enabled: bool = True

    @classmethod
    def from_registry(cls, ref: ComponentRef) -> _Working:
        return cls(
            scalars={
                "type": ref.type.value,
                "chart": ref.chart,
                "source": ref.source,
                "path": ref.path,
                "namespace": ref.namespace,
                "version": ref.version,
            },
            values=merge.copy_tree(ref.values),
            dependency_refs=ref.dependency_refs,
            health_check_asserts=ref.health_check_asserts,
            manifests=dict(ref.manifests),
        )

    def apply(self, patch: ComponentPatch) -> None:
        self.scalars.update(patch.scalars)
        if patch.values is not None:
            merge.merge_into(self.values, patch.values)
        if patch.dependency_refs is not None:
            self.dependency_refs = patch.dependency_refs
        if patch.health_check_asserts is not None:
            self.health_check_asserts = patch.health_check_asserts
        if patch.manifests is not None:
            self.manifests.update(patch.manifests)
        if patch.enabled is not None:
            self.enabled = patch.enabled

    def to_ref(self, name: str) -> ComponentRef:
        namespace = self.scalars["namespace"]
        return ComponentRef(
            name=name,
            type=ComponentType(self.scalars["type"]),
            namespace=namespace,
            version=self.scalars["version"],
            chart=self.scalars["chart"],
            source=self.scalars["source"],
            path=self.scalars["path"],
            values=self.values,
            dependency_refs=self.dependency_refs,
            health_check_asserts=tuple(a.in_namespace(namespace) for a in self.health_check_asserts),
            manifests=dict(sorted(self.manifests.items())),
        )


@dataclass
class _State:
    components: dict[str, _Working] = field(default_factory=dict)
    constraints: dict[tuple[str, str], constraint_model.Constraint] = field(default_factory=dict)
    certification: dict[str, Any] = field(default_factory=dict)
    deferred: dict[str, list[ComponentPatch]] = field(default_factory=dict)

    def apply(self, overlay: Overlay, catalog: Catalog) -> None:
        for constraint in overlay.constraints:
            self.constraints[(constraint.name, constraint.operator.value)] = constraint
        for patch in overlay.components:
            working = self.components.get(patch.name)
            if working is None:
                if patch.if_included:
                    # held back until an overlay includes the component; replayed in order then
                    self.deferred.setdefault(patch.name, []).append(patch)
                    continue
                registry = catalog.components.get(patch.name)
                if registry is None:
                    raise CatalogError(f"{overlay.source}: component {patch.name!r} is not in the registry")
                working = self.components[patch.name] = _Working.from_registry(registry)
                for earlier in self.deferred.pop(patch.name, []):
                    working.apply(earlier)
            working.apply(patch)
        if overlay.certification:
            self._merge_certification(overlay.certification)

    def _merge_certification(self, layer: dict[str, Any]) -> None:
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

    def component_refs(self) -> list[ComponentRef]:
        return [w.to_ref(name) for name, w in sorted(self.components.items()) if w.enabled]

    def sorted_constraints(self) -> tuple[constraint_model.Constraint, ...]:
        return tuple(self.constraints[k] for k in sorted(self.constraints))
