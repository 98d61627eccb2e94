"""Deciding on the Xid catalog: the workbook TSVs and `xid-catalog.yaml` into an `XidCatalog`.

Every field is checked on load (file, row and field named), so a bad catalog fails the build's
tests, not a node's monitor. The shipped files come from `dsx.catalog`; a catalog at a path a
user names is read by `dsx.files.health_files`.
"""

from __future__ import annotations

import csv
import functools
import io
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

import msgspec

from dsx import catalog
from dsx.errors import CatalogError, allowed_values_message
from dsx.health.parsing.xid.catalog import (
    BitPattern,
    CatalogEntry,
    DecodeRule,
    LostGpuMessage,
    MultiLineMessage,
    RecoveryAction,
    XidCatalog,
    bit_pattern,
)
from dsx.health.parsing.xid.drivers import GENERATIONS, Family, Layout
from dsx.model import schema
from dsx.model.health import RecommendedAction

log = logging.getLogger("dsx.health.parsing.xid")
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Text = Annotated[str, msgspec.Meta(min_length=1)]
_Texts = Annotated[list[_Text], msgspec.Meta(min_length=1)]


CATALOG_FOLDER = "xid"
CATALOG_DIR = catalog.path(CATALOG_FOLDER)
CATALOG_PATH = CATALOG_DIR / "xid-catalog.yaml"
WORKBOOK_XIDS = "workbook-xids.tsv"
WORKBOOK_DECODE = "workbook-nvlink5-decode.tsv"
WORKBOOK_BUCKETS = "workbook-buckets.tsv"
WORKBOOK_FILES = (WORKBOOK_XIDS, WORKBOOK_DECODE, WORKBOOK_BUCKETS)
PCI_PATTERN = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"


@functools.cache
def default_catalog() -> XidCatalog:
    """The shipped catalog, decided once per process."""
    workbook = {
        name: parse_tsv(catalog.text(CATALOG_FOLDER, name), source=str(CATALOG_DIR / name)) for name in WORKBOOK_FILES
    }
    return catalog_from_dict(catalog.mapping(CATALOG_FOLDER, CATALOG_PATH.name), workbook, source=str(CATALOG_PATH))


def parse_tsv(text: str, *, source: str) -> list[dict[str, str]]:
    """A workbook sheet's rows, cells stripped (`source` names the sheet in errors)."""
    try:
        return [
            {k: (v or "").strip() for k, v in row.items()}
            for row in csv.DictReader(io.StringIO(text, newline=""), delimiter="\t")
        ]
    except csv.Error as exc:
        raise CatalogError(f"{source}: malformed TSV: {exc}") from exc


class _BucketDoc(schema.Section, frozen=True):
    action: str
    meaning: str = ""


class _BucketRef(schema.Section, frozen=True):
    bucket: str


class _RecoveryDoc(schema.Section, frozen=True):
    code: _Count
    text: str
    action: str


class _LostGpuDoc(schema.Section, frozen=True):
    id: _Text
    bucket: str
    patterns: _Texts
    sources: _Texts
    """Every message names where it comes from (README.md)."""
    markers: _Texts
    code: _Count | None = None


class _MultiLineDoc(schema.Section, frozen=True):
    id: _Text
    opener: _Text
    closer: _Text
    markers: _Texts
    max_lines: Annotated[int, msgspec.Meta(ge=1, le=16)]


class _AnnotationDoc(schema.Section, frozen=True):
    code: _Count
    meaning: str = ""
    application_level: bool = False
    sources: list[str] = msgspec.field(default_factory=list)
    notes: str = ""


class _SxidDoc(schema.Section, frozen=True):
    code: _Count
    mnemonic: _Text
    meaning: _Text
    immediate_action: _Text
    investigatory_action: _Text
    nvs_class: Literal["FATAL", "NONFATAL"]
    sources: list[str] = msgspec.field(default_factory=list)
    notes: str = ""


class CatalogDocument(schema.Section, frozen=True):
    """The XidCatalog file as written (camelCase keys; old snake_case keys read with a warning).

    Bucket tokens under `buckets` are NVIDIA's, kept exactly; each entry is decoded on its own so
    an error names the token.
    """

    api_version: str
    kind: str
    buckets: Annotated[dict[str, object], msgspec.Meta(min_length=1)]
    unknown: _BucketRef
    unspecified: _BucketRef
    recovery_actions: list[_RecoveryDoc] = msgspec.field(default_factory=list)
    gpu_lost: list[_LostGpuDoc] = msgspec.field(default_factory=list)
    multi_line: list[_MultiLineDoc] = msgspec.field(default_factory=list)
    annotations: list[_AnnotationDoc] = msgspec.field(default_factory=list)
    sxids: list[_SxidDoc] = msgspec.field(default_factory=list)


def catalog_from_dict(
    data: Mapping[str, Any], workbook: Mapping[str, list[dict[str, str]]], *, source: str
) -> XidCatalog:
    """Validate the catalog: every bucket a row names is mapped, every action is a RecommendedAction."""
    doc = schema.document(
        data,
        CatalogDocument,
        api_version="dsx.health/v1alpha1",
        kind_name="XidCatalog",
        source=source,
        log=log,
        separator=": ",
        error=CatalogError,
    )
    buckets = {
        token: _action(
            schema.decode(spec, _BucketDoc, source=f"{source}: buckets.{token}", error=CatalogError).action,
            source,
            f"buckets.{token}",
        )
        for token, spec in doc.buckets.items()
    }

    def bucket(token: str, where: str) -> str:
        if token not in buckets:
            raise CatalogError(allowed_values_message(source, where, token, buckets))
        return token

    unknown = bucket(doc.unknown.bucket, "unknown.bucket")
    unspecified = bucket(doc.unspecified.bucket, "unspecified.bucket")
    annotations = _annotations(doc.annotations, source)
    entries: dict[tuple[Family, int], CatalogEntry] = {}
    for number, row in enumerate(workbook.get(WORKBOOK_XIDS, []), start=2):
        where = f"{WORKBOOK_XIDS} line {number}"
        code = _code(row.get("code", ""), where)
        note = annotations.pop(code, None) or _AnnotationDoc(code=code)
        immediate = bucket(row.get("immediate_bucket") or unspecified, f"{where}: immediate_bucket")
        investigatory = row.get("investigatory_bucket", "")
        if investigatory:
            bucket(investigatory, f"{where}: investigatory_bucket")
        if (Family.XID, code) in entries:
            raise CatalogError(f"{where}: Xid {code} appears twice")
        entries[(Family.XID, code)] = CatalogEntry(
            family=Family.XID,
            code=code,
            mnemonic=row.get("mnemonic", ""),
            immediate_action=immediate,
            investigatory_action=investigatory,
            meaning=note.meaning,
            application_level=note.application_level or immediate == "RESTART_APP",
            generations=tuple(g for g in GENERATIONS if row.get(g, "").upper() == "YES"),
            xid154_linkage=row.get("xid154_linkage", ""),
            sources=tuple(note.sources),
            notes=note.notes,
        )
    if annotations:
        raise CatalogError(f"{source}: annotations: Xid {min(annotations)} is not in {WORKBOOK_XIDS}")
    for index, sxid in enumerate(doc.sxids):
        entry = _sxid(sxid)
        bucket(entry.immediate_action, f"sxids[{index}].immediateAction")
        if (Family.SXID, entry.code) in entries:
            raise CatalogError(f"{source}: sxids[{index}]: code {entry.code} appears twice")
        entries[(Family.SXID, entry.code)] = entry
    rules: dict[int, list[DecodeRule]] = {}
    for number, row in enumerate(workbook.get(WORKBOOK_DECODE, []), start=2):
        rule = _decode_rule(row, f"{WORKBOOK_DECODE} line {number}")
        for name, token in (("recovery_bucket", rule.bucket), ("action2_bucket", rule.second_bucket)):
            if token:
                bucket(token, f"{WORKBOOK_DECODE} line {number}: {name}")
        if rule.investigatory_action:
            bucket(rule.investigatory_action, f"{WORKBOOK_DECODE} line {number}: investigatory_bucket")
        rules.setdefault(rule.xid, []).append(rule)
    workbook_buckets = tuple(row.get("bucket", "") for row in workbook.get(WORKBOOK_BUCKETS, []))
    recovery = tuple(
        RecoveryAction(item.code, item.text, _action(item.action, source, f"recoveryActions[{i}]"))
        for i, item in enumerate(doc.recovery_actions)
    )
    lost = tuple(_lost_gpu(item, source, f"gpuLost[{i}]") for i, item in enumerate(doc.gpu_lost))
    for index, message in enumerate(lost):
        bucket(message.bucket, f"gpuLost[{index}].bucket")
    multi = tuple(_multi_line(item, source, f"multiLine[{i}]") for i, item in enumerate(doc.multi_line))
    for index, joined in enumerate(multi):
        if joined.id not in {m.id for m in lost}:
            raise CatalogError(
                allowed_values_message(source, f"multiLine[{index}].id", joined.id, [m.id for m in lost])
            )
    return XidCatalog(
        entries=entries,
        bucket_actions=buckets,
        recovery_actions=recovery,
        unknown_bucket=unknown,
        unspecified_bucket=unspecified,
        decode_rules={code: tuple(found) for code, found in rules.items()},
        lost_gpu=lost,
        multi_line=multi,
        workbook_buckets=workbook_buckets,
    )


def _code(text: str, where: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise CatalogError(f"{where}: code: expected a non-negative integer, got {text!r}")
    return int(text)


def _annotations(rows: Iterable[_AnnotationDoc], source: str) -> dict[int, _AnnotationDoc]:
    found: dict[int, _AnnotationDoc] = {}
    for index, row in enumerate(rows):
        if row.code in found:
            raise CatalogError(f"{source}: annotations[{index}]: code {row.code} appears twice")
        found[row.code] = row
    return found


def _sxid(doc: _SxidDoc) -> CatalogEntry:
    return CatalogEntry(
        family=Family.SXID,
        code=doc.code,
        mnemonic=doc.mnemonic,
        immediate_action=doc.immediate_action,
        investigatory_action=doc.investigatory_action,
        meaning=doc.meaning,
        nvs_class=doc.nvs_class,
        sources=tuple(doc.sources),
        notes=doc.notes,
    )


def _decode_rule(row: Mapping[str, str], where: str) -> DecodeRule:
    def patterns(v1: str, v2: str) -> dict[Layout, BitPattern]:
        found = {
            Layout.V1: bit_pattern(row.get(v1, ""), f"{where}: {v1}"),
            Layout.V2: bit_pattern(row.get(v2, ""), f"{where}: {v2}"),
        }
        return {layout: pattern for layout, pattern in found.items() if pattern is not None}

    primary = patterns("v1_intrinfo_pattern_pre_r575", "v2_intrinfo_pattern_r575_plus")
    if len(primary) != 2 or not row.get("recovery_bucket"):
        raise CatalogError(f"{where}: expected V1 and V2 IntrInfo patterns and a recovery bucket")
    second = patterns("v1_action2_pattern", "v2_action2_pattern")
    if second and (len(second) != 2 or not row.get("action2_bucket")):
        raise CatalogError(f"{where}: a second action needs V1 and V2 patterns and action2_bucket")
    statuses: list[int] = []
    for text in filter(None, (part.strip() for part in row.get("error_status_hex", "").split("/"))):
        if not re.fullmatch(r"0x[0-9a-fA-F]{1,16}", text):
            raise CatalogError(f"{where}: error_status_hex: {text!r} is not a hex number like 0x00000001")
        statuses.append(int(text, 16))
    return DecodeRule(
        xid=_code(row.get("xid", ""), where),
        subcode=row.get("subcode", ""),
        patterns=primary,
        statuses=tuple(statuses),
        bucket=row["recovery_bucket"],
        second_patterns=second,
        second_bucket=row.get("action2_bucket", ""),
        investigatory_action=row.get("investigatory_bucket", ""),
        severity=row.get("severity", ""),
        hw_sw=row.get("hw_sw", ""),
    )


def _action(name: str, source: str, where: str) -> RecommendedAction:
    if name not in RecommendedAction.__members__:
        raise CatalogError(allowed_values_message(source, f"{where}.action", name, RecommendedAction.__members__))
    return RecommendedAction[name]


def _regex(text: object, source: str, where: str) -> re.Pattern[str]:
    if not isinstance(text, str) or not text:
        raise CatalogError(f"{source}: {where}: expected a regular expression")
    try:
        return re.compile(text.replace("<pci>", f"(?P<pci>{PCI_PATTERN})"))
    except re.error as exc:
        raise CatalogError(f"{source}: {where}: {text!r}: {exc}") from exc


def _lost_gpu(doc: _LostGpuDoc, source: str, where: str) -> LostGpuMessage:
    return LostGpuMessage(
        doc.id,
        doc.code,
        doc.bucket,
        tuple(_regex(p, source, f"{where}.patterns[{i}]") for i, p in enumerate(doc.patterns)),
        tuple(doc.sources),
        tuple(doc.markers),
    )


def _multi_line(doc: _MultiLineDoc, source: str, where: str) -> MultiLineMessage:
    return MultiLineMessage(
        doc.id,
        _regex(doc.opener, source, f"{where}.opener"),
        _regex(doc.closer, source, f"{where}.closer"),
        doc.max_lines,
        tuple(doc.markers),
    )
