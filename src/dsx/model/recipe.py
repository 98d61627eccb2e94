"""The resolved recipe: the one document every other part of dsx reads.

A recipe pins, for one environment (its criteria), the exact software a GPU cluster runs:
component charts and versions with fully merged values, the constraints the cluster must meet,
the order to deploy in, health asserts per component and, optionally, the certification
categories it must pass. This module is the contract: `Recipe.from_dict(...)` reads what
`dsx recipe` writes and `to_dict()` writes it back byte-for-byte (through dsx.serialization).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import msgspec

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError
from dsx.model import constraints as constraint_model
from dsx.model import health_asserts, schema

API_VERSION = "dsx.run/v1alpha1"
KIND = "Recipe"


class ComponentType(enum.StrEnum):
    HELM = "Helm"
    MANIFEST = "Manifest"
    KUSTOMIZE = "Kustomize"


@dataclass(frozen=True)
class ComponentRef:
    """One deployable unit with everything needed to install it.

    Helm: `chart` from `source` (https repository or `oci://` registry) at `version`, with
    `values`. Kustomize: `path` inside the `source` git repository at `version` (a tag).
    Manifest: `manifests` (file name → YAML text) applied as-is; `version` names the upstream
    release the manifests were taken from.
    """

    name: str
    type: ComponentType
    namespace: str
    version: str
    chart: str = ""
    source: str = ""
    path: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    dependency_refs: tuple[str, ...] = ()
    health_check_asserts: tuple[health_asserts.HealthCheckAssert, ...] = ()
    manifests: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type.value}
        if self.chart:
            out["chart"] = self.chart
        if self.source:
            out["source"] = self.source
        if self.path:
            out["path"] = self.path
        out["namespace"] = self.namespace
        out["version"] = self.version
        out["values"] = self.values
        out["dependencyRefs"] = list(self.dependency_refs)
        out["healthCheckAsserts"] = [a.to_dict() for a in self.health_check_asserts]
        out["manifests"] = dict(self.manifests)
        return out

    @classmethod
    def from_dict(cls, raw: object, *, source: str) -> ComponentRef:
        """Parse one componentRef; every malformation is a BadInputError naming `source` and the field."""
        return _component(schema.decode(raw, _ComponentRefDoc, source=source, separator=": "), source)


_Text = Annotated[str, msgspec.Meta(min_length=1)]


class _ComponentRefDoc(schema.Section, frozen=True):
    name: _Text
    type: ComponentType
    namespace: _Text
    version: _Text
    chart: str | None = None
    source: str | None = None
    path: str | None = None
    values: dict[str, Any] | None = None
    dependency_refs: list[str] | None = None
    health_check_asserts: list[Any] | None = None  # decoded and checked by dsx.model.health_asserts
    manifests: dict[str, str] | None = None


def _component(doc: _ComponentRefDoc, source: str) -> ComponentRef:
    asserts = health_asserts.parse_asserts(doc.health_check_asserts, source=f"{source}: {doc.name}: healthCheckAsserts")
    return ComponentRef(
        name=doc.name,
        type=doc.type,
        namespace=doc.namespace,
        version=doc.version,
        chart=doc.chart or "",
        source=doc.source or "",
        path=doc.path or "",
        values=doc.values or {},
        dependency_refs=tuple(doc.dependency_refs or ()),
        health_check_asserts=asserts,
        manifests=doc.manifests or {},
    )


class _MetadataDoc(schema.Section, frozen=True):
    name: _Text
    generator: str | None = None
    criteria: dict[str, Any] | None = None
    overlays: list[str] | None = None
    unvalidated_criteria: list[str] | None = None
    digest: str | None = None


class _RecipeDoc(schema.Section, frozen=True):
    """A recipe document's shape; how its parts fit together is checked after decoding."""

    api_version: str
    kind: str
    metadata: _MetadataDoc
    constraints: list[Any] | None = None  # decoded and checked by dsx.model.constraints
    component_refs: list[_ComponentRefDoc] | None = None
    deployment_order: list[str] | None = None
    certification: dict[str, Any] | None = None


@dataclass(frozen=True)
class RecipeMetadata:
    name: str
    generator: str
    criteria: dict[str, Any]
    overlays: tuple[str, ...]
    unvalidated_criteria: tuple[str, ...] = ()
    digest: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "generator": self.generator,
            "criteria": dict(self.criteria),
            "overlays": list(self.overlays),
            "unvalidatedCriteria": list(self.unvalidated_criteria),
        }
        if self.digest:
            out["digest"] = self.digest
        return out


@dataclass(frozen=True)
class Recipe:
    """A resolved, version-pinned recipe (see the module docstring and docs/recipes.md)."""

    metadata: RecipeMetadata
    constraints: tuple[constraint_model.Constraint, ...]
    component_refs: tuple[ComponentRef, ...]
    deployment_order: tuple[str, ...]
    certification: dict[str, Any] | None = None
    source: str = field(default="", compare=False)

    def component(self, name: str) -> ComponentRef:
        for ref in self.component_refs:
            if ref.name == name:
                return ref
        names = ", ".join(r.name for r in self.component_refs)
        raise NotFoundError(f"{self.source or 'recipe'}: no component {name!r}; components: {names}")

    def ordered_components(self) -> list[ComponentRef]:
        """Components in deployment order."""
        by_name = {r.name: r for r in self.component_refs}
        return [by_name[n] for n in self.deployment_order]

    def content(self) -> dict[str, Any]:
        """The document without `metadata.digest`: what the digest covers."""
        out: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": replace(self.metadata, digest="").to_dict(),
            "constraints": [c.to_dict() for c in self.constraints],
            "componentRefs": [r.to_dict() for r in self.component_refs],
        }
        if self.certification is not None:
            out["certification"] = self.certification
        out["deploymentOrder"] = list(self.deployment_order)
        return out

    def content_digest(self) -> str:
        return serialization.digest(self.content())

    def with_digest(self) -> Recipe:
        return replace(self, metadata=replace(self.metadata, digest=self.content_digest()))

    def to_dict(self) -> dict[str, Any]:
        out = self.content()
        if self.metadata.digest:
            out["metadata"]["digest"] = self.metadata.digest
        # keep the documented key order: digest last in metadata
        return out

    def verify_digest(self) -> bool:
        """Whether `metadata.digest` matches the content (False when absent)."""
        return bool(self.metadata.digest) and self.metadata.digest == self.content_digest()

    @classmethod
    def from_dict(cls, raw: object, *, source: str = "recipe") -> Recipe:
        """Read a recipe document; every malformation is a BadInputError naming `source` and the field."""
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{source}: a recipe must be a mapping")
        if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
            raise BadInputError(
                f"{source}: not a dsx recipe (apiVersion {raw.get('apiVersion')!r}, kind {raw.get('kind')!r}); "
                f"expected apiVersion {API_VERSION}, kind {KIND}"
            )
        doc = schema.decode(raw, _RecipeDoc, source=source, separator=": ")
        meta = doc.metadata
        metadata = RecipeMetadata(
            name=meta.name,
            generator=meta.generator or "",
            criteria=meta.criteria or {},
            overlays=tuple(meta.overlays or ()),
            unvalidated_criteria=tuple(meta.unvalidated_criteria or ()),
            digest=meta.digest or "",
        )
        parsed_constraints = constraint_model.parse_constraints(doc.constraints, source=f"{source}: constraints")
        refs = tuple(_component(r, f"{source}: componentRefs[{i}]") for i, r in enumerate(doc.component_refs or ()))
        names = [r.name for r in refs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise BadInputError(f"{source}: componentRefs: duplicate component {duplicates[0]!r}")
        order = list(doc.deployment_order or ())
        if sorted(order) != sorted(names):
            missing = sorted(set(names) - set(order)) or sorted(set(order) - set(names))
            raise BadInputError(
                f"{source}: deploymentOrder must list every component exactly once; mismatch at {missing[:3]}"
            )
        for ref in refs:
            for dep in ref.dependency_refs:
                if dep not in names:
                    raise BadInputError(f"{source}: {ref.name}: dependencyRefs names unknown component {dep!r}")
                if order.index(dep) > order.index(ref.name):
                    raise BadInputError(f"{source}: deploymentOrder puts {ref.name} before its dependency {dep}")
        return cls(
            metadata=metadata,
            constraints=parsed_constraints,
            component_refs=refs,
            deployment_order=tuple(order),
            certification=doc.certification,
            source=source,
        )
