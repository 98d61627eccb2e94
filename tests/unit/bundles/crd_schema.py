"""Turn a CRD's openAPIV3Schema into a strict JSON Schema for `jsonschema` (test data generator).

Run once when a CRD is updated:
    python tests/unit/bundles/crd_schema.py ../shared/schemas/crds/X.yaml tests/data/bundles/schemas/
The output is committed; tests never read ../shared. Strict like kubeconform `-strict`: where
the CRD lists properties and does not preserve unknown fields, other keys are errors (the API
server would silently prune them, which is how a typo in a generated object goes unnoticed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

DROP = ("x-kubernetes-validations", "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type")


def convert(node: Any) -> Any:
    if isinstance(node, list):
        return [convert(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROP or key == "description":
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {k: convert(v) for k, v in value.items()}
        else:
            out[key] = convert(value)
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    int_or_string = out.pop("x-kubernetes-int-or-string", False)
    out.pop("x-kubernetes-embedded-resource", None)
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if int_or_string:
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in out and not preserve and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def main(crd_path: str, out_dir: str) -> None:
    crd = yaml.safe_load(Path(crd_path).read_text(encoding="utf-8"))
    spec = crd["spec"]
    for version in spec["versions"]:
        schema = convert(version["schema"]["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}
        group_version = f"{spec['group']}/{version['name']}"
        schema["$comment"] = f"{spec['names']['kind']} {group_version} from {Path(crd_path).name}"
        name = f"{spec['names']['kind'].lower()}-{spec['group'].split('.')[0]}-{version['name']}.json"
        Path(out_dir, name).write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(name)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
