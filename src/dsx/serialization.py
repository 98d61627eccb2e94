"""Deterministic YAML and JSON in and out.

Why a module of its own: every artifact dsx writes (recipes, bundles, reports) must be
byte-identical for the same inputs, and read back by Kubernetes and Helm, which parse
YAML 1.1. PyYAML's safe dumper quotes `on`, `yes`, `no`, `1.10` and `0755`, so strings
stay strings. Keys keep insertion order (callers decide the order), block style,
literal blocks for multi-line strings, no line wrapping.

Loading names the file on every error so the CLI can print one clear line.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import rfc8785
import yaml

from dsx.errors import BadInputError, NotFoundError

# Emission stays on the pure-Python emitter: libyaml's passes lone surrogates through unescaped.
# Parsing uses libyaml when present (~5x faster on large snapshots, same documents).
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_LINE_BREAKS_YAML_NORMALISES = frozenset("\x85\u2028\u2029")


class _Dumper(yaml.SafeDumper):
    """SafeDumper with literal multi-line strings and no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


# Plain scalars that some YAML 1.1 reader (go-yaml v2 inside sigs.k8s.io/yaml, Helm) would not
# read back as a string; PyYAML's own resolver misses `y`/`n` and exponents without a dot.
_AMBIGUOUS = re.compile(
    r"""^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
    |~|null|Null|NULL|
    [-+]?(?:0|[1-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?0[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?0b[01_]+|[-+]?0o[0-7]+
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?
    |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|<<|=)$""",
    re.VERBOSE,
)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if _LINE_BREAKS_YAML_NORMALISES.intersection(data) or "\r" in data:
        # only double quotes keep NEL, LS, PS and CR exact (as escapes)
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    if _AMBIGUOUS.match(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(data: Any) -> str:
    """YAML text for Kubernetes/Helm consumers; same input → same bytes."""
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=2**31 - 1,  # never wrap (libyaml needs an int)
        indent=2,
    )


def dump_yaml_documents(documents: list[Any]) -> str:
    """A multi-document YAML stream separated by `---`."""
    return "---\n".join(dump_yaml(d) for d in documents)


def dump_json(data: Any) -> str:
    """Pretty JSON with stable indentation and a trailing newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def canonical_json(data: Any) -> bytes:
    """RFC 8785 canonical JSON: the input to every content digest.

    Integers beyond ±(2^53 − 1) have no exact JSON (IEEE double) form; Helm and Kubernetes
    would round them too, so they are rejected as bad input rather than silently changed.
    """
    try:
        return rfc8785.dumps(data)
    except rfc8785.IntegerDomainError as exc:
        raise BadInputError(f"{exc}: integers must lie within ±(2^53 - 1)") from exc
    except rfc8785.CanonicalizationError as exc:
        raise BadInputError(f"cannot canonicalize: {exc}") from exc


def digest(data: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `data`."""
    return "sha256:" + hashlib.sha256(canonical_json(data)).hexdigest()


def parse_yaml(text: str, *, source: str) -> Any:
    """Parse YAML text, naming `source` and the position on a syntax error."""
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(exc, "problem", None) or str(exc)
        raise BadInputError(f"{source}: malformed YAML{where}: {problem}") from exc


def parse_yaml_documents(text: str, *, source: str) -> list[Any]:
    """Parse a multi-document YAML stream, dropping empty documents."""
    try:
        return [d for d in yaml.load_all(text, Loader=_SafeLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise BadInputError(f"{source}: malformed YAML: {exc}") from exc


def read_text(path: str | Path) -> str:
    """Read a file or `-` (stdin), mapping OS errors to the dsx tree."""
    import sys

    if str(path) == "-":
        return sys.stdin.read()
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise NotFoundError(f"{p}: file not found") from exc
    except IsADirectoryError as exc:
        raise BadInputError(f"{p}: is a directory, expected a file") from exc
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{p}: not UTF-8 text") from exc
    except OSError as exc:
        raise BadInputError(f"{p}: cannot read: {exc.strerror}") from exc


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse one YAML (or JSON) file."""
    return parse_yaml(read_text(path), source=str(path))


def load_mapping_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping."""
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "an empty document"
        raise BadInputError(f"{path}: expected a mapping at the top level, got {kind}")
    return data
