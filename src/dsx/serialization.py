"""Deterministic YAML and JSON in and out, and the one safe loader for every document dsx reads.

Why a module of its own: every artifact dsx writes (recipes, bundles, reports) must be
byte-identical for the same inputs, and read back by Kubernetes and Helm, which parse
YAML 1.1. PyYAML's safe dumper quotes `on`, `yes`, `no`, `1.10` and `0755`, so strings
stay strings. Keys keep insertion order (callers decide the order), block style,
literal blocks for multi-line strings, no line wrapping.

Loading treats every document as hostile until checked (files, request bodies, ConfigMaps):
the text size, the nesting depth and the element count after alias expansion are bounded
(aliases themselves follow go-yaml's rule, which Kubernetes' YAML libraries use), a key may
appear once per mapping, numbers must be finite and fit 64 bits, and only JSON-shaped values
come out (timestamps stay the text they were written as, as `sigs.k8s.io/yaml` reads them).
Every refusal is a `BadInputError` naming the file, the field and the limit.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import rfc8785
import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from dsx.errors import BadInputError

_DOUBLE_QUOTED_ONLY = re.compile("[\r\x85\u2028\u2029]")
"""CR and the line breaks YAML normalises (NEL, LS, PS): only double quotes keep them exact."""


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
    if _DOUBLE_QUOTED_ONLY.search(data):
        # only double quotes keep NEL, LS, PS and CR exact (as escapes)
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    if _AMBIGUOUS.match(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _represent_str)

if TYPE_CHECKING:
    _CDumper: type[yaml.SafeDumper] | None = None
else:
    _CDumper = None
    if hasattr(yaml, "CSafeDumper"):

        class _CDumper(yaml.CSafeDumper):
            """`_Dumper` on libyaml's emitter: the same representers, ~10x faster (see `_libyaml_writes_same`)."""

            def ignore_aliases(self, data: Any) -> bool:
                return True

        _CDumper.add_representer(str, _represent_str)


def plain_text(text: str) -> bool:
    """Text both of PyYAML's emitters write unescaped: printable (no control or format characters,
    NEL, LS, PS, BOM or surrogates; line feeds aside) and within the BMP."""
    return text.replace("\n", "").isprintable() and (text.isascii() or max(text) <= "\uffff")


_SHORT_KEY_BYTES = 100
"""Keys shorter stay simple keys in both emitters (the limit is 128: PyYAML counts characters
and the tag, libyaml bytes)."""
_SMALL_INT = 10**18


def _libyaml_writes_same(data: Any) -> bool:
    """Whether libyaml's emitter writes `data` byte for byte as PyYAML's does.

    They part on a top-level scalar and a keep-chomped literal (`|+`; libyaml adds `...`),
    on empty, multi-line or long keys (PyYAML writes `? key`, libyaml a simple key), and on
    text that is not `plain_text` (lone surrogates pass through libyaml unescaped). Such a
    document takes the pure-Python emitter; tests/unit/test_serialization.py holds the two
    to the same bytes on generated documents.
    """
    if not isinstance(data, dict | list):
        return False
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if value.endswith("\n\n") or value == "\n" or not plain_text(value):
                return False
        elif isinstance(value, dict):
            for key in value:
                if isinstance(key, str):
                    if not key or "\n" in key or not plain_text(key):
                        return False
                    if len(key.encode()) >= _SHORT_KEY_BYTES:
                        return False
                elif not (isinstance(key, int) and -_SMALL_INT < key < _SMALL_INT):
                    return False
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif value is not None and not isinstance(value, int | float):
            return False
    return True


def dump_yaml(data: Any) -> str:
    """YAML text for Kubernetes/Helm consumers; same input → same bytes (whichever emitter writes them).

    libyaml's emitter (PyYAML's C dumper) writes what it writes exactly as PyYAML's pure-Python
    one does (`_libyaml_writes_same`), at a fraction of the cost; PyYAML's own writes the rest.
    """
    dumper = _CDumper if _CDumper is not None and _libyaml_writes_same(data) else _Dumper
    return _dump(data, dumper)


def _dump(data: Any, dumper: type[yaml.SafeDumper]) -> str:
    return yaml.dump(  # type: ignore[no-any-return]
        data,
        Dumper=dumper,
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
    """Pretty JSON with stable indentation and a trailing newline.

    JSON has no NaN or Infinity (strict parsers reject Python's spelling of them), so a
    non-finite number is refused naming where it is rather than written.
    """
    try:
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        where = _non_finite_field(data)
        raise BadInputError(f"cannot write JSON: {where}: not a finite number; JSON has no NaN or Infinity") from None


def _non_finite_field(data: Any) -> str:
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return _field(path)
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{path}[{n}]") for n, v in enumerate(value))
    return "(unknown field)"


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


@dataclass(frozen=True)
class Limits:
    """Bounds on one document; the defaults fit every file dsx reads with a wide margin."""

    max_bytes: int = 256 * 2**20
    """Text size: `kubectl get nodes -o yaml` of a 5,000-node cluster runs to ~150 MiB."""
    max_depth: int = 100
    """Nesting of mappings and sequences; real documents stay under 20, Python recursion at 1000."""
    max_elements: int = 10_000_000
    """Scalars, mappings and sequences after alias expansion: what a consumer would walk. Alias
    expansion itself stays near 400,000 by the ratio rule; this bounds plain documents."""
    duplicate_keys: bool = False
    """Whether a repeated key is allowed (the last one wins, as Helm reads chart values)."""


DEFAULT_LIMITS = Limits()

# go-yaml v3 (decode.go, allowedAliasRatio): beyond 100 aliases and 1000 decodes, aliases may
# make up 99% of a document below 400,000 decodes, falling to 10% at 4,000,000.
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000
_INT_RANGE = (-(2**63), 2**64 - 1)
_TAG = "tag:yaml.org,2002:"
_MERGE, _INT, _FLOAT = _TAG + "merge", _TAG + "int", _TAG + "float"
_CHECKED_SCALARS = frozenset((_INT, _FLOAT, _TAG + "bool"))


class _Refused(Exception):
    """A limit or rule broken inside the loader; `field` is the dotted path to it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def _allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _ALIAS_RATIO_LOW:
        return 0.99
    if decodes >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decodes - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


if TYPE_CHECKING:
    _BaseLoader = yaml.SafeLoader
else:  # libyaml's parser and composer when present: ~5x faster on large snapshots
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """The safe loader with JSON-shaped values only: no bytes, sets, ordered pairs or datetimes."""

    yaml_constructors = {  # noqa: RUF012 - PyYAML looks constructors up on the class
        tag: make
        for tag, make in SafeConstructor.yaml_constructors.items()
        if tag is None or tag.removeprefix(_TAG) in {"null", "bool", "int", "float", "str", "seq", "map"}
    }

    def construct_timestamp_text(self, node: ScalarNode) -> str:
        return str(self.construct_scalar(node))

    def nodes(self) -> Iterator[Node]:
        while self.check_node():
            node = self.get_node()
            if node is not None:
                yield node


_Loader.add_constructor(_TAG + "timestamp", _Loader.construct_timestamp_text)


_Trail = tuple[Any, ...]
"""Where a node sits: `(parent trail, parent node, position among its children)`, or `()` at the top."""


def _children(node: Node) -> list[Node]:
    """A sequence's items, or a mapping's keys and values interleaved."""
    if isinstance(node, SequenceNode):
        return list(node.value)
    return [item for pair in node.value for item in pair]


def _path(trail: _Trail) -> str:
    """The dotted field path of a trail, built only when an error needs it."""
    labels: list[str] = []
    while trail:
        trail, parent, position = trail
        if isinstance(parent, SequenceNode):
            labels.append(f"[{position}]")
        else:
            key = parent.value[position // 2][0]
            labels.append("." + (str(key.value) if isinstance(key, ScalarNode) else "<key>"))
    return _field("".join(reversed(labels)).removeprefix("."))


def _field(path: str) -> str:
    """A field path as error messages show it: cut at 120 characters, `(top level)` when empty."""
    if len(path) > 120:
        return path[:117] + "..."
    return path or "(top level)"


def _check_scalar(node: ScalarNode, trail: _Trail, constructor: _Loader) -> None:
    """A number or boolean must read as its tag says (`!!int abc` does not), finite and within 64 bits."""
    if node.tag == _INT and len(node.value) > 100:
        raise _Refused(_path(trail), f"integer of {len(node.value)} characters is out of range (64 bits)")
    try:
        value = constructor.yaml_constructors[node.tag](constructor, node)
    except (ValueError, KeyError, IndexError):
        raise _Refused(_path(trail), f"{node.value!r} is not a valid {node.tag.removeprefix(_TAG)}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise _Refused(_path(trail), f"{node.value!r} is not a finite number; only finite numbers are allowed")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise _Refused(_path(trail), f"{value} is out of range; integers must fit 64 bits")


def _check_keys(node: MappingNode, trail: _Trail) -> None:
    seen: dict[tuple[str, str], int] = {}
    for position, (key, _) in enumerate(node.value):
        if key.tag == _MERGE or not isinstance(key, ScalarNode):
            continue
        line = key.start_mark.line + 1
        if (key.tag, key.value) in seen:
            where = _path((trail, node, 2 * position))
            raise _Refused(where, f"key appears twice (lines {seen[key.tag, key.value]} and {line})")
        seen[key.tag, key.value] = line


def _inspect(root: Node, limits: Limits, constructor: _Loader) -> None:
    """Walk the composed graph once, before anything is constructed.

    An alias is the same node object met a second time, so memoised counts give the size
    after expansion (in elements and in characters of scalar text) without expanding
    anything; a node met again while still open is an alias to its own ancestor, which no
    consumer could ever finish walking. Paths are built only for an error: this walk runs on
    every snapshot.
    """
    if isinstance(root, ScalarNode):
        if root.tag in _CHECKED_SCALARS:
            _check_scalar(root, (), constructor)
        return
    elements: dict[int, int] = {}
    characters: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()
    seen_scalars: set[int] = set()
    written = 0
    stack: list[tuple[Node, _Trail, int, bool]] = [(root, (), 1, False)]
    while stack:
        node, trail, depth, leaving = stack.pop()
        ident = id(node)
        if leaving:
            size, text, tallest = 1, 0, 1
            for child in _children(node):
                if isinstance(child, ScalarNode):
                    size, text = size + 1, text + len(child.value)
                else:
                    kid = id(child)
                    size, text, tallest = size + elements[kid], text + characters[kid], max(tallest, 1 + height[kid])
            elements[ident], characters[ident], height[ident] = size, text, tallest
            open_nodes.discard(ident)
            if size > limits.max_elements:
                limit = limits.max_elements
                raise _Refused(_path(trail), f"expands (aliases included) to over {limit} elements (limit {limit})")
            if text > limits.max_bytes:
                limit = limits.max_bytes
                raise _Refused(_path(trail), f"text expands (aliases included) past {limit} bytes (limit {limit})")
            continue
        if ident in open_nodes:
            raise _Refused(_path(trail), "an alias refers to a node that contains it")
        if ident in elements:
            depth += height[ident] - 1
        if depth > limits.max_depth:
            raise _Refused(_path(trail), f"nested deeper than {limits.max_depth} levels (limit {limits.max_depth})")
        if ident in elements:
            continue
        written += 1
        if isinstance(node, MappingNode) and not limits.duplicate_keys:
            _check_keys(node, trail)
        open_nodes.add(ident)
        stack.append((node, trail, depth, True))
        children = _children(node)
        for position in range(len(children) - 1, -1, -1):
            child = children[position]
            if not isinstance(child, ScalarNode):
                stack.append((child, (trail, node, position), depth + 1, False))
            elif id(child) not in seen_scalars:  # met again: an alias to a scalar
                seen_scalars.add(id(child))
                written += 1
                if child.tag in _CHECKED_SCALARS:
                    _check_scalar(child, (trail, node, position), constructor)
    total = elements[id(root)]
    aliased = total - written
    if aliased > 100 and total > 1000 and aliased / total > _allowed_alias_ratio(total):
        raise _Refused("(top level)", f"excessive aliasing: {aliased} of {total} elements come from aliases")


def _check_size(text: str | bytes, source: str, max_bytes: int | None) -> None:
    if max_bytes is not None and len(text) > max_bytes:
        raise BadInputError(f"{source}: larger than {max_bytes} bytes (limit {max_bytes})")


def _yaml_documents(text: str | bytes, source: str, limits: Limits) -> Iterator[Any]:
    _check_size(text, source, limits.max_bytes)
    loader = _Loader(text if isinstance(text, str) else _decode(text, source))
    try:
        for node in loader.nodes():
            _inspect(node, limits, loader)
            yield loader.construct_document(node)
    except _Refused as exc:
        raise BadInputError(f"{source}: {exc.field}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(exc, "problem", None) or str(exc)
        raise BadInputError(f"{source}: malformed YAML{where}: {problem}") from exc
    except RecursionError:
        raise BadInputError(f"{source}: nested too deeply to read (limit {limits.max_depth})") from None
    finally:
        loader.dispose()


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{source}: not UTF-8 text") from exc


def parse_yaml(text: str | bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The one document in `text` (None when empty), checked against `limits`, naming `source`."""
    documents = list(_yaml_documents(text, source, limits))
    if len(documents) > 1:
        raise BadInputError(f"{source}: expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None


def parse_yaml_documents(text: str | bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> list[Any]:
    """Every document of a multi-document YAML stream, dropping empty ones."""
    return [d for d in _yaml_documents(text, source, limits) if d is not None]


def parse_json(text: str | bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """A JSON document under the same rules as YAML: finite numbers, unique keys, bounded size."""
    _check_size(text, source, limits.max_bytes)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in items:
            if key in mapping and not limits.duplicate_keys:
                raise _Refused("(a mapping)", f"key {key!r} appears twice")
            mapping[key] = value
        return mapping

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise _Refused("(a number)", f"{text!r} is not a finite number; only finite numbers are allowed")
        return value

    def integer(text: str) -> int:
        value = int(text) if len(text) <= 100 else _INT_RANGE[1] + 1
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise _Refused("(a number)", f"{text[:30]!r} is out of range; integers must fit 64 bits")
        return value

    def constant(name: str) -> Any:
        raise _Refused("(a number)", f"{name} is not a finite number; only finite numbers are allowed")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_float=number, parse_int=integer, parse_constant=constant)
        _check_tree(data, limits)
    except _Refused as exc:
        raise BadInputError(f"{source}: {exc.field}: {exc.problem}") from None
    except RecursionError:
        raise BadInputError(f"{source}: nested too deeply to read (limit {limits.max_depth})") from None
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{source}: not UTF-8 text") from exc
    except ValueError as exc:
        raise BadInputError(f"{source}: not JSON: {exc}") from exc
    return data


def _check_tree(data: Any, limits: Limits) -> None:
    """Depth and element count of a parsed JSON value (JSON has no aliases to expand)."""
    count = 0
    stack: list[tuple[Any, str, int]] = [(data, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        count += 1
        if depth > limits.max_depth:
            raise _Refused(_field(path), f"nested deeper than {limits.max_depth} levels (limit {limits.max_depth})")
        if count > limits.max_elements:
            raise _Refused("(top level)", f"more than {limits.max_elements} elements (limit {limits.max_elements})")
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{n}]", depth + 1) for n, v in enumerate(value))


def parse_mapping(text: str | bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The one YAML (or JSON) document in `text`, which must be a mapping at the top level."""
    data = parse_yaml(text, source=source, limits=limits)
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "an empty document"
        raise BadInputError(f"{source}: expected a mapping at the top level, got {kind}")
    return data
