#!/usr/bin/env python3
"""Resolve NVIDIA AICR's recipes for the criteria sets dsx compares itself with, and save the facts.

Reads AICR's `recipes/` (overlays, registry, component values files) from a git checkout at the
tag dsx compares against, resolves each criteria set the way AICR v0.11.1 does (base chain from
the leaf overlay plus `monitoring-hpa`; scalar fields: later non-empty wins; `overrides`: shallow
merge per top-level key; `dependencyRefs` replaced; `manifestFiles` appended; values =
`components/<name>/values.yaml` < the last `valuesFile` (both only when a
`valuesFile` is set) < `overrides`; registry defaults fill the
rest) and writes one YAML file per criteria set under tests/data/recipes/aicr-recipes/: each
component's chart, source, namespace, version, dependencies, manifest file names and values
flattened to dotted keys. Facts only; hack/gen-parity-table.py compares them with dsx.

    python hack/aicr-recipe-facts.py /work/.mirror/NVIDIA+aicr/repo [--ref v0.11.1]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "tests" / "data" / "recipes" / "aicr-recipes"

LEAVES = {
    "eks-h100-ubuntu-training-kubeflow": "h100-eks-ubuntu-training-kubeflow",
    "gke-h100-cos-training": "h100-gke-cos-training",
    "aks-h100-ubuntu-inference-dynamo": "h100-aks-ubuntu-inference-dynamo",
    "kind-h100-inference": "h100-kind-inference",
}
"""dsx criteria-set name → AICR leaf overlay for the same criteria."""

SCALARS = ("type", "chart", "source", "namespace", "version", "valuesFile")


def _show(git_dir: Path, ref: str, path: str) -> Any:
    text = subprocess.run(
        ["git", "-C", str(git_dir), "show", f"{ref}:recipes/{path}"], check=True, capture_output=True, text=True
    ).stdout
    return yaml.safe_load(text)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys to leaves; lists, scalars, nulls and empty maps are leaves."""
    if isinstance(values, dict) and values:
        out: dict[str, Any] = {}
        for key, value in values.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: values}


def resolve(git_dir: Path, ref: str, leaf: str) -> dict[str, Any]:
    registry = {c["name"]: c for c in _show(git_dir, ref, "registry.yaml")["components"]}
    chain: list[str] = []
    name = leaf
    while name and name != "base":
        chain.insert(0, name)
        name = _show(git_dir, ref, f"overlays/{name}.yaml")["spec"].get("base") or "base"
    order = ["base", "monitoring-hpa", *chain]
    merged: dict[str, dict[str, Any]] = {}
    for overlay in order:
        for ref_ in _show(git_dir, ref, f"overlays/{overlay}.yaml")["spec"].get("componentRefs") or []:
            into = merged.setdefault(ref_["name"], {"name": ref_["name"], "overrides": {}, "manifestFiles": []})
            for field in SCALARS:
                if ref_.get(field):
                    into[field] = ref_[field]
            into["overrides"].update(ref_.get("overrides") or {})
            if ref_.get("dependencyRefs") is not None:
                into["dependencyRefs"] = list(ref_["dependencyRefs"])
            for manifest in ref_.get("manifestFiles") or []:
                if manifest not in into["manifestFiles"]:
                    into["manifestFiles"].append(manifest)
    components: dict[str, Any] = {}
    for name, comp in sorted(merged.items()):
        helm = registry.get(name, {}).get("helm") or {}
        default_file = f"components/{name}/values.yaml"
        values: dict[str, Any] = {}
        files = [default_file, comp["valuesFile"]] if comp.get("valuesFile") else []
        for path in dict.fromkeys(files):
            with contextlib.suppress(subprocess.CalledProcessError):  # a component without values.yaml
                values = _deep_merge(values, _show(git_dir, ref, path) or {})
        values = _deep_merge(values, comp["overrides"])
        enabled = values.pop("enabled", True) is not False
        components[name] = {
            "chart": comp.get("chart") or str(helm.get("defaultChart", "")).split("/")[-1] or None,
            "source": comp.get("source") or helm.get("defaultRepository") or None,
            "namespace": comp.get("namespace") or helm.get("defaultNamespace") or None,
            "version": str(comp.get("version") or helm.get("defaultVersion") or "") or None,
            "enabled": enabled,
            "dependencyRefs": sorted(comp.get("dependencyRefs") or []),
            "manifestFiles": [Path(m).name for m in comp["manifestFiles"]],
            "values": flatten(values) if values else {},
        }
    return {"overlays": order, "components": components}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path, help="a git directory of github.com/NVIDIA/aicr")
    parser.add_argument("--ref", default="v0.11.1")
    args = parser.parse_args(argv)
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, leaf in LEAVES.items():
        facts = {"aicr": args.ref, "leaf": leaf, **resolve(args.git_dir, args.ref, leaf)}
        header = (
            f"# NVIDIA AICR {args.ref} recipe for {name} (leaf overlay {leaf}), resolved by\n"
            "# hack/aicr-recipe-facts.py from github.com/NVIDIA/aicr recipes/: facts only (keys, values, pins).\n"
        )
        text = header + yaml.safe_dump(facts, sort_keys=False, width=200, allow_unicode=True)
        (TARGET / f"{name}.yaml").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
