"""NVRM Xid, NVSwitch SXid and lost-GPU kernel-log lines → classified records; a burst deduplicator.

Why its own module: the kernel-log monitor, `dsx sentinel parse`, NVML and the sim's injected
faults all read the same codes, and what a code means (fatal or not, what to do) must come from
one place: the catalog in `dsx/catalog/xid/`, NVIDIA's Xid catalog workbook as generated TSVs
(`workbook-*.tsv`) plus dsx's judgement over it (`xid-catalog.yaml`; provenance in its README).

Lines come in many dresses: bare `NVRM: Xid (PCI:0000:01:00): 31, ...`, behind a `[uptime]`,
`dmesg -T` (`[Fri Aug 30 11:43:14 2024]`), `dmesg --decode --time-format=iso`
(`kern  :warn  : 2025-01-21T04:41:44,283390+00:00`), syslog with or without a host, `kernel:`
only; old drivers print no `pid=`, some print `(0000:03:00)` without `PCI:`, posters redact the
address to `PCI:...`. The parser finds the NVRM/SXid marker first and reads whatever prefix is
in front of it, so an unknown prefix costs the timestamp, never the record.

Verdicts: an event is fatal exactly when its action is not NONE. The action is the one dsx maps
the row's immediate bucket to, except: Xid 154 follows the recovery action it announces; NVLink5
Xids 144-150 are decoded with NVIDIA's decode sheet (sub-code, IntrInfo bits against the V1 or V2
layout chosen by the driver version, error status → bucket, second action), and when no rule
matches the record says so and the message's Fatal/Non-fatal word decides; SXids follow that word.
Xids NVIDIA buckets RESTART_APP or IGNORE are never fatal. Codes missing from the workbook, and
its rows without a bucket, escalate (CONTACT_SUPPORT), as NVSentinel does.

Driver messages without a code that mean a GPU is lost (`gpuLost` in the catalog: fallen off the
bus in its one- and multi-line forms, RmInitAdapter failures, probe failures) are records too;
`KernelLogReader` joins the multi-line form and remembers the driver version from the NVRM banner.
Numbers are bounded at parse (codes 9 digits, pids 10, hex 16) and every pattern is linear, so
any input gives records or nothing, quickly.

`BurstDeduplicator` admits the first record per (node, family, GPU, code) within a window and
counts the repeats, so a storm of Xid 95 lines (NVSentinel saw 800k on one node) becomes one
event per window; "fallen off the bus" and the Xid 79 before it share a key. A fatal record's
window is short (10 s): a node is released minutes after its first fault at the earliest, so
the same fault after the repair is always a new event (a 300 s window once hid it).
"""

from __future__ import annotations

import csv
import enum
import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from dsx import catalog, serialization
from dsx.errors import BadInputError, CatalogError, allowed_values_message
from dsx.model import schema
from dsx.model.health import RecommendedAction

log = logging.getLogger("dsx.health.xid")
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Text = Annotated[str, msgspec.Meta(min_length=1)]
_Texts = Annotated[list[_Text], msgspec.Meta(min_length=1)]


class Family(enum.Enum):
    XID = "XID"
    SXID = "SXID"
    NVRM = "NVRM"
    """A driver message without a code (RmInitAdapter failed, probe failed); `kind` names it."""


class Layout(enum.Enum):
    """The IntrInfo bit layout of NVLink5 Xids: V1 before driver R575, V2 from R575."""

    V1 = "V1"
    V2 = "V2"


V2_FROM_MAJOR = 575
GENERATIONS = ("a100", "h100", "b100", "gb200")


@dataclass(frozen=True)
class DriverVersion:
    """The NVIDIA driver a line was logged by, and where dsx learnt it."""

    major: int
    minor: int
    patch: int | None
    source: str
    """kernel-log (the NVRM banner before the line), configuration, or node-label."""

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor:02d}" + (f".{self.patch:02d}" if self.patch is not None else "")

    @property
    def layout(self) -> Layout:
        return Layout.V2 if self.major >= V2_FROM_MAJOR else Layout.V1


_VERSION = re.compile(r"(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?")


def parse_driver_version(text: str, source: str, where: str | None = None) -> DriverVersion:
    """`575.57.08`, `570.124`, `575` → a DriverVersion; anything else is a BadInputError naming `where`."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise BadInputError(f"{where or source}: driver version: {text!r} is not a version like 575.57.08")
    return DriverVersion(int(match.group(1)), int(match.group(2) or 0), _int(match.group(3)), source)


_DRIVER_LABELS = (
    (
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
    ),
    ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
)


def driver_version_from_labels(labels: Mapping[str, str]) -> DriverVersion | None:
    """The driver GPU Feature Discovery reports in the node's labels, or None."""
    for major_key, minor_key, patch_key in _DRIVER_LABELS:
        major, minor = labels.get(major_key, ""), labels.get(minor_key, "0")
        if major.isdigit() and minor.isdigit() and len(major) <= 4 and len(minor) <= 4:
            patch = labels.get(patch_key, "")
            return DriverVersion(
                int(major), int(minor), int(patch) if patch.isdigit() and len(patch) <= 4 else None, "node-label"
            )
    return None


def resolve_driver_version(
    configured: str | None, labels: Mapping[str, str] | None = None, where: str = "configuration"
) -> DriverVersion | None:
    """The monitor's configured version, else the node label's. A banner in the log beats both (KernelLogReader)."""
    if configured:
        return parse_driver_version(configured, "configuration", where)
    return driver_version_from_labels(labels or {})


def _int(text: str | None) -> int | None:
    return int(text) if text else None


@dataclass(frozen=True)
class CatalogEntry:
    family: Family
    code: int
    mnemonic: str
    immediate_action: str
    """NVIDIA's Resolution Bucket token (Immediate Action), e.g. RESET_GPU, RESTART_APP, XID_154."""
    investigatory_action: str
    meaning: str = ""
    application_level: bool = False
    generations: tuple[str, ...] = ()
    """The GPU generations the workbook applies the Xid to (a100, h100, b100, gb200)."""
    xid154_linkage: str = ""
    """Whether (and since which driver) an Xid 154 follows this Xid, as the workbook says."""
    nvs_class: str = ""
    """SXids: NVSentinel's FATAL/NONFATAL class, used when the message carries no Fatal word."""
    sources: tuple[str, ...] = ()
    notes: str = ""


@dataclass(frozen=True)
class RecoveryAction:
    """One Xid 154 recovery action: `0x4 (Drain and Reset)`."""

    code: int
    text: str
    action: RecommendedAction


@dataclass(frozen=True)
class BitPattern:
    """A decode-sheet IntrInfo pattern: '0'/'1' must match, '-' is free; the last character is bit 0."""

    text: str
    mask: int
    value: int

    def matches(self, number: int) -> bool:
        return number & self.mask == self.value

    def example(self) -> int:
        """The smallest number the pattern matches (free bits 0)."""
        return self.value


def bit_pattern(text: str, where: str) -> BitPattern | None:
    if not text:
        return None
    if len(text) > 64 or set(text) - set("01-"):
        raise CatalogError(f"{where}: {text!r}: expected up to 64 characters of 0, 1 and -")
    mask = value = 0
    for char in text:
        mask, value = mask << 1 | (char != "-"), value << 1 | (char == "1")
    return BitPattern(text, mask, value)


@dataclass(frozen=True)
class DecodeRule:
    """One row of NVIDIA's "Xid 144-150 Decode" sheet."""

    xid: int
    subcode: str
    """As the sheet writes it; alternatives separated by '/' (NETIR_LINK_EVT/NETIR_LINK_DOWN)."""
    patterns: Mapping[Layout, BitPattern]
    statuses: tuple[int, ...]
    """Error status values that select the row; empty: any."""
    bucket: str
    second_patterns: Mapping[Layout, BitPattern]
    second_bucket: str
    investigatory_action: str
    severity: str
    hw_sw: str

    @property
    def subcodes(self) -> frozenset[str]:
        return frozenset(_subcode_key(s) for s in self.subcode.split("/"))

    def bucket_for(self, layout: Layout, intr_info: int, status: int | None) -> tuple[str, bool] | None:
        """(bucket, second action?) when IntrInfo and status select this row, else None."""
        if self.statuses and status not in self.statuses:
            return None
        if self.patterns[layout].matches(intr_info):
            return self.bucket, False
        second = self.second_patterns.get(layout)
        if second is not None and second.matches(intr_info):
            return self.second_bucket, True
        return None


def _subcode_key(text: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", text.upper()).strip("_")


@dataclass(frozen=True)
class Nvlink5Decode:
    """What the decode sheet made of an NVLink5 Xid line (144-150), matched or not."""

    subcode: str | None
    intr_info: int | None
    error_status: int | None
    link: int | None
    layout: str | None
    """V1, V2, or V1+V2 when the driver version was unknown and both layouts agreed."""
    driver_version: str | None
    driver_source: str | None
    matched: bool
    rule: str | None = None
    """The matching row's sub-code cell."""
    bucket: str | None = None
    second_action: bool = False
    investigatory_action: str | None = None
    sheet_severity: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "subcode": self.subcode,
            "intr_info": f"0x{self.intr_info:08x}" if self.intr_info is not None else None,
            "error_status": f"0x{self.error_status:08x}" if self.error_status is not None else None,
            "link": self.link,
            "layout": self.layout,
            "driver_version": self.driver_version,
            "driver_source": self.driver_source,
            "matched": self.matched,
            "rule": self.rule,
            "bucket": self.bucket,
            "second_action": self.second_action,
            "investigatory_action": self.investigatory_action,
            "sheet_severity": self.sheet_severity,
            "note": self.note,
        }


@dataclass(frozen=True)
class Verdict:
    immediate_action: str
    recommended_action: RecommendedAction
    is_fatal: bool
    in_catalog: bool
    recovery_action: str | None = None
    investigatory_action: str | None = None
    decode: Nvlink5Decode | None = None


@dataclass(frozen=True)
class LostGpuMessage:
    """A driver message that means a GPU is lost or unusable (catalog `gpuLost`)."""

    id: str
    code: int | None
    """The Xid it is recorded as (79 for fallen off the bus), None for family NVRM."""
    bucket: str
    patterns: tuple[re.Pattern[str], ...]
    sources: tuple[str, ...]
    markers: tuple[str, ...]
    """Plain text one of which every such line holds: tested before the patterns, for speed."""

    def marked(self, line: str) -> bool:
        return any(marker in line for marker in self.markers)


@dataclass(frozen=True)
class MultiLineMessage:
    id: str
    opener: re.Pattern[str]
    closer: re.Pattern[str]
    max_lines: int
    markers: tuple[str, ...]

    def marked(self, line: str) -> bool:
        return any(marker in line for marker in self.markers)


@dataclass(frozen=True)
class XidCatalog:
    entries: Mapping[tuple[Family, int], CatalogEntry]
    bucket_actions: Mapping[str, RecommendedAction]
    recovery_actions: tuple[RecoveryAction, ...]
    unknown_bucket: str
    unspecified_bucket: str
    decode_rules: Mapping[int, tuple[DecodeRule, ...]] = field(default_factory=dict)
    lost_gpu: tuple[LostGpuMessage, ...] = ()
    multi_line: tuple[MultiLineMessage, ...] = ()
    workbook_buckets: tuple[str, ...] = ()
    """The workbook's bucket list, in sheet order."""

    def entry(self, family: Family, code: int) -> CatalogEntry | None:
        return self.entries.get((family, code))

    def lost_gpu_message(self, kind: str) -> LostGpuMessage | None:
        return next((m for m in self.lost_gpu if m.id == kind), None)

    def bucket_verdict(self, bucket: str, *, in_catalog: bool = True, **extra: Any) -> Verdict:
        action = self.bucket_actions[bucket]
        return Verdict(bucket, action, action is not RecommendedAction.NONE, in_catalog, **extra)

    def classify(
        self,
        family: Family,
        code: int,
        message: str,
        driver: DriverVersion | None = None,
        *,
        stated_fatal: bool | None = None,
    ) -> Verdict:
        """What a line with this code and message means; see the module docstring for the rules.

        `stated_fatal`: an SXid report's own severity (its `Severity N` line), used in place of the
        message's Fatal/Non-fatal word when the message line was not read."""
        entry = self.entry(family, code)
        worded = None
        if family is Family.SXID:
            worded = _worded_severity(message) if stated_fatal is None else stated_fatal
        if entry is None:
            if worded is False:
                return Verdict(self.unknown_bucket, RecommendedAction.NONE, False, False)
            return self.bucket_verdict(self.unknown_bucket, in_catalog=False)
        investigatory = entry.investigatory_action or None
        if family is Family.SXID:
            fatal = entry.nvs_class == "FATAL" if worded is None else worded
            if not fatal:
                return Verdict(entry.immediate_action, RecommendedAction.NONE, False, True, None, investigatory)
            return self.bucket_verdict(entry.immediate_action, investigatory_action=investigatory)
        if entry.immediate_action == "XID_154":
            return self._xid_154(entry, message)
        if code in self.decode_rules:
            return self._nvlink5(entry, message, driver)
        return self.bucket_verdict(entry.immediate_action, investigatory_action=investigatory)

    def _xid_154(self, entry: CatalogEntry, message: str) -> Verdict:
        recovery = self.recovery_action(message)
        investigatory = entry.investigatory_action or None
        if recovery is None:
            verdict = self.bucket_verdict(self.unknown_bucket)
            return Verdict(
                entry.immediate_action,
                verdict.recommended_action,
                verdict.is_fatal,
                True,
                _announced(message),
                investigatory,
            )
        fatal = recovery.action is not RecommendedAction.NONE
        return Verdict(entry.immediate_action, recovery.action, fatal, True, recovery.text, investigatory)

    def recovery_action(self, message: str) -> RecoveryAction | None:
        """The action an Xid 154 message moves to, matched by its text, else by its code."""
        match = _RECOVERY.search(message)
        if match is None:
            return None
        code, text = int(match.group(1), 16), (match.group(2) or "").strip().lower()
        by_text = next((r for r in self.recovery_actions if text and r.text.lower() == text), None)
        return by_text or next((r for r in self.recovery_actions if r.code == code), None)

    def decode_nvlink5(self, code: int, message: str, driver: DriverVersion | None = None) -> Nvlink5Decode:
        """Read sub-code, link, IntrInfo and error status, and find the decode-sheet row they select."""
        match = _NVL5.match(message)
        empty = Nvlink5Decode(
            None, None, None, None, None, driver.text if driver else None, driver.source if driver else None, False
        )
        if match is None:
            return replace(empty, note="no NVLink5 decode: the message carries no 'Link N (IntrInfo ErrorStatus)'")
        subcode = match.group("sub")
        intr_info = int(match.group("intr"), 16)
        status = int(match.group("status"), 16) if match.group("status") else None
        link_text = match.group("link")
        link = int(link_text) if not link_text.startswith("-") else None
        layouts = [driver.layout] if driver else [Layout.V1, Layout.V2]
        found: dict[Layout, tuple[DecodeRule, str, bool] | None] = {}
        for layout in layouts:
            found[layout] = _select(self.decode_rules.get(code, ()), layout, subcode, intr_info, status)
        hits = {layout: hit for layout, hit in found.items() if hit is not None}
        base = replace(empty, subcode=subcode, intr_info=intr_info, error_status=status, link=link)
        described = f"sub-code {subcode}, IntrInfo 0x{intr_info:08x}, error status " + (
            f"0x{status:08x}" if status is not None else "absent"
        )
        if not hits:
            tried = "/".join(layout.value for layout in layouts)
            why = f"driver {driver.text} from {driver.source}" if driver else "driver version unknown"
            return replace(
                base,
                layout=tried,
                note=f"no rule of the Xid {code} decode sheet matches {described} ({tried} layout, {why})",
            )
        buckets = {hit[1] for hit in hits.values()}
        if len(buckets) > 1:
            return replace(
                base,
                layout="V1+V2",
                note=f"{described} selects different rules in the V1 and V2 layouts and the driver version is unknown",
            )
        layout_text = "+".join(layout.value for layout in hits)
        rule, bucket, second = next(iter(hits.values()))
        note = "" if driver else f"driver version unknown; the {layout_text} layout matched"
        if _subcode_key(subcode) not in rule.subcodes:
            note = "; ".join(filter(None, [note, f"sub-code {subcode} printed, the matching row says {rule.subcode}"]))
        return replace(
            base,
            layout=layout_text,
            matched=True,
            rule=rule.subcode,
            bucket=bucket,
            second_action=second,
            investigatory_action=rule.investigatory_action or None,
            sheet_severity=rule.severity,
            note=note,
        )

    def _nvlink5(self, entry: CatalogEntry, message: str, driver: DriverVersion | None) -> Verdict:
        decode = self.decode_nvlink5(entry.code, message, driver)
        if decode.matched and decode.bucket is not None:
            return self.bucket_verdict(decode.bucket, investigatory_action=decode.investigatory_action, decode=decode)
        worded = _worded_severity(message)
        if worded is False:
            note = decode.note + "; the message says Non-fatal"
            return Verdict(
                entry.immediate_action, RecommendedAction.NONE, False, True, None, None, replace(decode, note=note)
            )
        note = decode.note + ("; the message says Fatal" if worded else "; escalated")
        verdict = self.bucket_verdict(entry.immediate_action)
        return Verdict(
            entry.immediate_action,
            verdict.recommended_action,
            verdict.is_fatal,
            True,
            None,
            None,
            replace(decode, note=note),
        )


def _select(
    rules: Iterable[DecodeRule], layout: Layout, subcode: str, intr_info: int, status: int | None
) -> tuple[DecodeRule, str, bool] | None:
    """The first row selected by IntrInfo and status, preferring rows that name the printed sub-code."""
    key = _subcode_key(subcode)
    fallback: tuple[DecodeRule, str, bool] | None = None
    for rule in rules:
        hit = rule.bucket_for(layout, intr_info, status)
        if hit is None:
            continue
        if key in rule.subcodes:
            return rule, hit[0], hit[1]
        fallback = fallback or (rule, hit[0], hit[1])
    return fallback


_RECOVERY = re.compile(r"\bto (0x[0-9a-fA-F]{1,16})(?: \(([^)]*)\))?")
_WORDED_NONFATAL = re.compile(r"\bnon-?fatal\b", re.IGNORECASE)
_WORDED_FATAL = re.compile(r"\bfatal\b", re.IGNORECASE)
_NVL5 = re.compile(
    r"(?P<sub>[A-Za-z][\w/]{0,63})\s+\S+\s.*?\bLink\s+(?P<link>-?\d{1,4})\s*[(\[]\s*"
    r"(?P<intr>0x[0-9a-fA-F]{1,16})(?:[\s,]+(?P<status>0x[0-9a-fA-F]{1,16}))?"
)


def _announced(message: str) -> str | None:
    match = _RECOVERY.search(message)
    return match.group(2) if match and match.group(2) else None


def _worded_severity(message: str) -> bool | None:
    """True/False when the message says Fatal/Non-fatal itself, None when it does not."""
    if _WORDED_NONFATAL.search(message):
        return False
    if _WORDED_FATAL.search(message):
        return True
    return None


# --- catalog loading -----------------------------------------------------------------------------

CATALOG_DIR = catalog.path("xid")
CATALOG_PATH = CATALOG_DIR / "xid-catalog.yaml"
WORKBOOK_XIDS = "workbook-xids.tsv"
WORKBOOK_DECODE = "workbook-nvlink5-decode.tsv"
WORKBOOK_BUCKETS = "workbook-buckets.tsv"
PCI_PATTERN = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"


@functools.cache
def default_catalog() -> XidCatalog:
    return load_catalog(CATALOG_PATH)


def load_catalog(path: Path) -> XidCatalog:
    """The YAML judgement at `path` over the workbook TSVs beside it."""
    data = serialization.load_mapping_file(path)
    workbook = {name: read_tsv(path.parent / name) for name in (WORKBOOK_XIDS, WORKBOOK_DECODE, WORKBOOK_BUCKETS)}
    return catalog_from_dict(data, workbook, source=str(path))


def read_tsv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(handle, delimiter="\t")]
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read: {exc.strerror}") from exc


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


# --- line parsing --------------------------------------------------------------------------------

_PCI = r"(?:PCI:)?(?P<pci>[^)]{0,64})"
_XID = re.compile(r"NVRM: Xid \(" + _PCI + r"\): (?P<code>\d{1,9})(?!\d)(?:, ?(?P<rest>.*))?")
_SXID = re.compile(r"SXid \(" + _PCI + r"\): (?P<code>\d{1,9})(?!\d)(?:, ?(?P<rest>.*))?")
_SXID_DEVICE = re.compile(r"(?P<device>[\w-]{1,64}): $")
"""Searched only in the 66 characters before `SXid (`: a device name tried at every position of a
long line costs 64 steps a character (0.1 s on an 80 KB line of digits)."""
_BANNER = re.compile(
    r"NVRM: loading NVIDIA UNIX [^\n]{0,80}?Kernel Module(?: for [\w-]{1,32})?\s{1,8}"
    r"(?P<version>\d{1,4}\.\d{1,4}(?:\.\d{1,4})?)(?!\d)"
)
_PID_NAME = re.compile(
    r"(?:pid=(?P<pid>'<unknown>'|<unknown>|\d{1,10})(?:, {0,16}|,|$))?(?:name=(?P<name>[^,]{0,256}?)(?:, {0,16}|,|$))?"
)
"""`pid=N, name=X, ` with any padding after the commas (`pid=1234,   name=python3`), or `name=` alone."""
_MIG = re.compile(r"^(?P<pci>\S{1,32}) GPU-I:(?P<gi>\d{1,4})(?: GPU-CI:(?P<ci>\d{1,4}))?$")
"""A MIG-attributed Xid's address: `PCI:0000:01:00 GPU-I:05` (NVIDIA's A100 memory error management
guide), with the compute instance where the driver adds it (`GPU-CI:02`)."""
_SXID_CONTINUATION = re.compile(r"(?:Severity (?P<severity>\d{1,3}) Engine instance (?P<instance>\d{1,4})|Data \{)")
"""The lines the NVSwitch driver prints after an SXid's message (`_nvswitch_dump_error_entry` in
open-gpu-kernel-modules' error_nvswitch.c): the error entry's severity (0 non-fatal, 1 fatal) and
its raw data. Each carries the SXid number, none the message."""
SXID_REPORT_LINES = 16
"""Lines within which an SXid's message, Severity and Data lines are one report (other switches'
reports may interleave)."""
_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,9})(?!\d)")
_NVLINK = re.compile(r"\blink (\d{1,4})\b", re.IGNORECASE)
_CANONICAL_PCI = re.compile(
    r"^(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{2}):(?P<device>[0-9a-f]{2})(?:\.(?P<function>[0-7]))?$"
)
_PREFIXES = (
    re.compile(r"(?P<facility>[a-z]+)\s*:(?P<level>[a-z]+)\s*:\s*"),
    re.compile(r"(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)\s+"),
    re.compile(r"\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]\s*"),
    re.compile(r"(?P<syslog>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\s+"),
    re.compile(r"(?P<host>[^\s:\[\]]+)\s+(?=kernel:)"),
    re.compile(r"kernel:\s*"),
    re.compile(r"\[\s*(?P<uptime>\d{1,12}\.\d{1,9})\]\s*"),
)


@dataclass(frozen=True)
class XidRecord:
    """One Xid/SXid line, or one driver message that means a GPU is lost, read and classified."""

    line_number: int
    family: Family
    code: int
    """The Xid/SXid number; for family NVRM 0 (`kind` names the message)."""
    pci_address: str | None
    """As printed (`0000:01:00`, `0000:07:00.0`); None when absent or redacted."""
    pci_bdf: str | None
    """Canonical `dddd:bb:dd.f` lower case, for matching against NVML and nvidia-smi bus ids."""
    message: str
    verdict: Verdict
    mnemonic: str | None
    application_level: bool
    code_inferred: bool = False
    """True for a lost-GPU message recorded as an Xid it did not print (fallen off the bus → 79)."""
    kind: str | None = None
    """The catalog's lost-GPU message id (GPU_FALLEN_OFF_THE_BUS, RM_INIT_ADAPTER_FAILED, ...)."""
    pid: int | None = None
    process_name: str | None = None
    device: str | None = None
    """The NVSwitch device for SXids (`nvidia-nvswitch2`)."""
    primary_code: int | None = None
    """Xid 45's `caused by previous Xid N`."""
    gpu_instance: int | None = None
    """The MIG GPU instance a MIG-attributed Xid names (`GPU-I:05`)."""
    compute_instance: int | None = None
    """The MIG compute instance, where printed (`GPU-CI:02`)."""
    continuation: bool = False
    """An SXid report's Severity or Data line (not its message); `KernelLogReader` joins these."""
    stated_severity: int | None = None
    """An SXid Severity line's number (0 non-fatal, 1 fatal)."""
    nvlink: int | None = None
    hostname: str | None = None
    timestamp: datetime | None = None
    """From a dated prefix (ISO, dmesg -T); naive when the line carries no zone. Syslog prefixes have no year: None."""
    timestamp_text: str | None = None
    uptime_seconds: float | None = None
    raw: str = ""
    lines: int = 1
    """Kernel-log lines the message spans (the multi-line fallen-off-the-bus message: 2 or 3)."""

    @property
    def is_fatal(self) -> bool:
        return self.verdict.is_fatal

    @property
    def recommended_action(self) -> RecommendedAction:
        return self.verdict.recommended_action

    @property
    def error_code(self) -> str:
        """`79`, `12028`; the message id for family NVRM."""
        return self.kind if self.family is Family.NVRM and self.kind else str(self.code)

    def to_dict(self) -> dict[str, Any]:
        decode = self.verdict.decode
        return {
            "line": self.line_number,
            "lines": self.lines,
            "family": self.family.value,
            "code": self.code,
            "kind": self.kind,
            "pci_address": self.pci_address,
            "pci_bdf": self.pci_bdf,
            "is_fatal": self.verdict.is_fatal,
            "recommended_action": self.verdict.recommended_action.name,
            "immediate_action": self.verdict.immediate_action,
            "investigatory_action": self.verdict.investigatory_action,
            "message": self.message,
            "mnemonic": self.mnemonic,
            "in_catalog": self.verdict.in_catalog,
            "application_level": self.application_level,
            "code_inferred": self.code_inferred,
            "recovery_action": self.verdict.recovery_action,
            "nvlink5_decode": decode.to_dict() if decode else None,
            "primary_code": self.primary_code,
            "gpu_instance": self.gpu_instance,
            "compute_instance": self.compute_instance,
            "continuation": self.continuation,
            "stated_severity": self.stated_severity,
            "nvlink": self.nvlink,
            "pid": self.pid,
            "process_name": self.process_name,
            "device": self.device,
            "hostname": self.hostname,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "timestamp_text": self.timestamp_text,
            "uptime_seconds": self.uptime_seconds,
        }


def parse_text(
    text: str, xid_catalog: XidCatalog | None = None, driver: DriverVersion | None = None
) -> list[XidRecord]:
    """Every record in a kernel log, with 1-based line numbers (a joined message: its first line)."""
    return list(iter_records(text.split("\n"), xid_catalog, driver))


def iter_records(
    raw_lines: Iterable[str], xid_catalog: XidCatalog | None = None, driver: DriverVersion | None = None
) -> Iterator[XidRecord]:
    reader = KernelLogReader(xid_catalog, driver)
    for number, line in enumerate(raw_lines, start=1):
        record = reader.feed(line, number)
        if record is not None:
            yield record


def driver_banner(line: str) -> DriverVersion | None:
    """The version in `NVRM: loading NVIDIA UNIX ... Kernel Module  575.57.08 ...`, else None."""
    if "NVRM: loading" not in line:
        return None
    match = _BANNER.search(line)
    return parse_driver_version(match.group("version"), "kernel-log") if match else None


@dataclass
class _Opened:
    message: MultiLineMessage
    lines: list[tuple[int, str]]
    """The opening line and the NVRM lines after it."""
    seen: int = 0
    """Lines fed since the opener, of any kind."""


@dataclass
class _SxidReport:
    """The lines of one SXid report read so far (message, Severity, Data)."""

    last: int
    """`KernelLogReader._fed` at its latest line."""
    message_seen: bool
    severity_seen: bool
    told: bool
    """Its record was returned (at the message line, or at the Severity line when that came first)."""
    lines: list[str] = field(default_factory=list)


class KernelLogReader:
    """Reads consecutive lines of one kernel log: joins the multi-line lost-GPU message and takes
    the driver version from the NVRM banner, which beats the one it was given (configuration or
    node label) from then on, because it names the driver that printed the lines after it.

    An SXid report (its message line, then `Severity N ...` and `Data {...}` lines with the same
    switch, address and number, within `SXID_REPORT_LINES`) gives one record: the message's,
    judged by its Fatal/Non-fatal word. Where the Severity line comes first (the message lost or
    printed later), the record is returned there, judged by the severity the driver states; the
    message joins it without a second record. A second message or Severity line of the same error
    starts the next report (the driver prints one of each per report). A Data line that opens a
    report gives a record that is never fatal (its code and address, no verdict); the report's
    verdict still comes after it."""

    MAX_OPEN_REPORTS = 256

    def __init__(self, xid_catalog: XidCatalog | None = None, driver: DriverVersion | None = None) -> None:
        self.catalog = xid_catalog or default_catalog()
        self.driver = driver
        self._opened: _Opened | None = None
        self._fed = 0
        self._reports: dict[tuple[Any, ...], _SxidReport] = {}
        """Open SXid reports by (switch, address, number, link or engine instance)."""

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready state to resume from: the banner's driver version and an open multi-line message."""
        banner = self.driver if self.driver and self.driver.source == "kernel-log" else None
        opened = self._opened
        return {
            "driver": [banner.major, banner.minor, banner.patch] if banner else None,
            "opened": {"id": opened.message.id, "lines": opened.lines, "seen": opened.seen} if opened else None,
        }

    def restore(self, state: Mapping[str, Any] | None) -> None:
        """Resume from `snapshot()`; None (no state yet) leaves the reader as it is."""
        if not state:
            return
        if state.get("driver"):
            major, minor, patch = state["driver"]
            self.driver = DriverVersion(int(major), int(minor), None if patch is None else int(patch), "kernel-log")
        opened = state.get("opened")
        message = next((m for m in self.catalog.multi_line if opened and m.id == opened["id"]), None)
        if opened and message is not None:
            lines = [(int(number), str(text)) for number, text in opened["lines"]]
            self._opened = _Opened(message, lines, int(opened["seen"]))

    def feed(self, line: str, line_number: int = 0) -> XidRecord | None:
        """The record this line completes, or None."""
        self._fed += 1
        opened = self._opened
        if opened is not None:
            opened.seen += 1
            if opened.seen > opened.message.max_lines:
                self._opened = opened = None
        banner = driver_banner(line)
        if banner is not None:
            self.driver = banner
            return None
        record = parse_line(line, line_number, self.catalog, self.driver)
        if record is not None and record.family is Family.SXID:
            return self._sxid(record)
        if record is not None or "NVRM" not in line:
            return record
        for message in self.catalog.multi_line:
            if not message.marked(line):
                continue
            if message.opener.search(line):
                self._opened = _Opened(message, [(line_number, line.rstrip("\r\n"))])
                return None
            if message.closer.search(line):
                return self._close(message, line, line_number)
        if opened is not None:
            opened.lines.append((line_number, line.rstrip("\r\n")))
        return None

    def _sxid(self, record: XidRecord) -> XidRecord | None:
        """One record per SXid report; see the class docstring."""
        if self._reports:
            self._reports = {k: r for k, r in self._reports.items() if self._fed - r.last <= SXID_REPORT_LINES}
        base = (record.device, record.pci_bdf or record.pci_address, record.code)
        severity = record.stated_severity is not None
        key, report = self._report_for(base, record, severity)
        if report is None:
            if len(self._reports) >= self.MAX_OPEN_REPORTS:
                del self._reports[min(self._reports, key=lambda k: self._reports[k].last)]
            says = not record.continuation or severity
            self._reports[key] = _SxidReport(self._fed, not record.continuation, severity, says, [record.raw])
            return record  # a Data line opening a report: a record that is never fatal, the verdict still to come
        report.last = self._fed
        report.lines.append(record.raw)
        report.message_seen = report.message_seen or not record.continuation
        report.severity_seen = report.severity_seen or severity
        if report.told or (record.continuation and not severity):
            return None
        report.told = True
        return replace(record, raw="\n".join(report.lines), lines=len(report.lines))

    def _report_for(
        self, base: tuple[str | None, str | None, int], record: XidRecord, severity: bool
    ) -> tuple[tuple[Any, ...], _SxidReport | None]:
        """The open report this line belongs to (None: it starts one), and that report's key.

        A message names its link (`Link 37`), a Severity line its engine instance (37 for a link's
        error): they meet on (switch, address, number, link). A Data line names neither and joins
        the latest report of its switch, address and number; so does a Severity line or a message
        when that report has no link yet (opened by a Data line, or a message that named none)."""
        latest = max((k for k in self._reports if k[:3] == base), key=lambda k: self._reports[k].last, default=None)
        if record.continuation and not severity:
            return (latest or (*base, None)), (self._reports[latest] if latest else None)
        link = record.nvlink if not record.continuation else _engine_instance(record.message)
        key = (*base, link)
        report = self._reports.get(key)
        if report is None and latest is not None and latest[3] is None:
            opened = self._reports[latest]  # opened by a Data line, or by a message that named no link
            if (severity and not opened.severity_seen) or (not record.continuation and not opened.message_seen):
                key, report = latest, opened
        if report is not None and (
            (not record.continuation and report.message_seen) or (severity and report.severity_seen)
        ):
            return key, None  # a second message (or Severity) line: the next report of the same error
        return key, report

    def _close(self, message: MultiLineMessage, line: str, line_number: int) -> XidRecord | None:
        opened, self._opened = self._opened, None
        parts = (opened.lines if opened and opened.message is message else []) + [(line_number, line.rstrip("\r\n"))]
        first_number, first = parts[0]
        joined = first + "".join(" " + _after_marker(text) for _, text in parts[1:])
        record = parse_line(joined, first_number, self.catalog, self.driver)
        if record is None:  # the closing line alone: a GPU fell off the bus, which one is not known
            lost = self.catalog.lost_gpu_message(message.id)
            if lost is None:
                return None
            record = _lost_record(
                lost, None, _after_marker(line), line, line_number, self.catalog, line[: line.find("NVRM")]
            )
        return replace(record, raw="\n".join(text for _, text in parts), lines=len(parts))


def _engine_instance(message: str) -> int | None:
    """A Severity line's engine instance (`Severity 1 Engine instance 37 ...` → 37)."""
    match = _SXID_CONTINUATION.match(message)
    return int(match.group("instance")) if match and match.group("instance") else None


def _after_marker(line: str) -> str:
    at = line.find("NVRM:")
    return line[at + 5 :].strip() if at >= 0 else line.strip()


def parse_line(
    line: str, line_number: int = 0, xid_catalog: XidCatalog | None = None, driver: DriverVersion | None = None
) -> XidRecord | None:
    """The record of one kernel-log line, or None when it reports no Xid, SXid or lost GPU."""
    if "Xid" not in line and "NVRM" not in line:
        return None
    line = line.rstrip("\r\n")
    xid_catalog = xid_catalog or default_catalog()
    family = Family.XID
    match = _XID.search(line)
    device: re.Match[str] | None = None
    if match is None and "SXid" in line:
        match = _SXID.search(line)
        family = Family.SXID
        if match is not None:
            device = _SXID_DEVICE.search(line, max(0, match.start() - 66), match.start())
    if match is None:
        return _lost_gpu_line(line, line_number, xid_catalog) if "NVRM" in line else None
    fields = match.groupdict()
    fields["device"] = device.group("device") if device else None
    start = device.start() if device else match.start()
    code = int(fields["code"])
    rest = (fields.get("rest") or "").strip()
    pid = name = None
    if family is Family.XID:
        pid_match = _PID_NAME.match(rest)
        if pid_match and pid_match.end() > 0:
            pid_text, name = pid_match.group("pid"), pid_match.group("name")
            pid = int(pid_text) if pid_text and pid_text.isdigit() else None
            name = None if name in (None, "", "<unknown>", "'<unknown>'") else name.strip()
            rest = rest[pid_match.end() :].strip()
    printed = (fields.get("pci") or "").strip()
    mig = _MIG.match(printed)
    pci = _printed_pci(mig.group("pci").removeprefix("PCI:") if mig else printed)
    continuation = _SXID_CONTINUATION.match(rest) if family is Family.SXID else None
    severity = int(continuation.group("severity")) if continuation and continuation.group("severity") else None
    entry = xid_catalog.entry(family, code)
    if continuation is not None and severity is None:  # a Data line states no severity: never a verdict
        bucket = entry.immediate_action if entry else xid_catalog.unknown_bucket
        verdict = Verdict(bucket, RecommendedAction.NONE, False, entry is not None)
    else:
        stated = None if severity is None else severity >= 1
        verdict = xid_catalog.classify(family, code, rest, driver, stated_fatal=stated)
    caused_by = _CAUSED_BY.search(rest) if code == 45 else None
    nvlink = _NVLINK.search(rest)
    link = int(nvlink.group(1)) if nvlink else None
    if verdict.decode is not None and verdict.decode.link is not None:
        link = verdict.decode.link
    return XidRecord(
        line_number=line_number,
        family=family,
        code=code,
        pci_address=pci,
        pci_bdf=canonical_pci_address(pci) if pci else None,
        message=rest,
        verdict=verdict,
        mnemonic=entry.mnemonic if entry else None,
        application_level=entry.application_level if entry else False,
        pid=pid,
        process_name=name,
        device=fields.get("device"),
        primary_code=int(caused_by.group(1)) if caused_by else None,
        gpu_instance=int(mig.group("gi")) if mig else None,
        compute_instance=int(mig.group("ci")) if mig and mig.group("ci") else None,
        continuation=continuation is not None,
        stated_severity=severity,
        nvlink=link,
        raw=line,
        **_read_prefix(line[:start]),
    )


def _printed_pci(text: str | None) -> str | None:
    pci = (text or "").strip() or None
    return None if pci is None or "..." in pci else pci


def _lost_gpu_line(line: str, line_number: int, xid_catalog: XidCatalog) -> XidRecord | None:
    for message in xid_catalog.lost_gpu:
        if not message.marked(line):
            continue
        for pattern in message.patterns:
            match = pattern.search(line)
            if match is None:
                continue
            marker = line.rfind("NVRM:", 0, match.start() + 1)
            start = marker if marker >= 0 else match.start()
            text = line[start + 5 :].strip() if marker >= 0 else line[start:].strip()
            pci = _printed_pci(match.groupdict().get("pci"))
            return _lost_record(message, pci, text, line, line_number, xid_catalog, line[:start])
    return None


def _lost_record(
    message: LostGpuMessage,
    pci: str | None,
    text: str,
    line: str,
    line_number: int,
    xid_catalog: XidCatalog,
    prefix: str,
) -> XidRecord:
    entry = xid_catalog.entry(Family.XID, message.code) if message.code is not None else None
    return XidRecord(
        line_number=line_number,
        family=Family.XID if message.code is not None else Family.NVRM,
        code=message.code or 0,
        pci_address=pci,
        pci_bdf=canonical_pci_address(pci) if pci else None,
        message=text,
        verdict=xid_catalog.bucket_verdict(message.bucket),
        mnemonic=entry.mnemonic if entry else message.id,
        application_level=False,
        code_inferred=message.code is not None,
        kind=message.id,
        raw=line,
        **_read_prefix(prefix),
    )


def _read_prefix(prefix: str) -> dict[str, Any]:
    """Timestamp, uptime and host from whatever stands before the NVRM/SXid marker."""
    if not prefix:
        return {"hostname": None, "timestamp": None, "timestamp_text": None, "uptime_seconds": None}
    found: dict[str, str] = {}
    position = 0
    progress = True
    while progress and position < len(prefix):
        progress = False
        for pattern in _PREFIXES:
            match = pattern.match(prefix, position)
            if match and match.end() > position:
                found.update({k: v for k, v in match.groupdict().items() if v})
                position = match.end()
                progress = True
                break
    stamp_text = found.get("iso") or found.get("ctime") or found.get("syslog")
    return {
        "hostname": found.get("host"),
        "timestamp": _timestamp(found),
        "timestamp_text": stamp_text,
        "uptime_seconds": float(found["uptime"]) if "uptime" in found else None,
    }


def _timestamp(found: Mapping[str, str]) -> datetime | None:
    try:
        if "iso" in found:
            return datetime.fromisoformat(found["iso"].replace(",", "."))
        if "ctime" in found:
            return datetime.strptime(found["ctime"], "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return None


@functools.lru_cache(maxsize=4096)
def canonical_pci_address(text: str) -> str | None:
    """`0000:01:00`, `00000000:10:1C.0`, `10:1c.0` → `0000:01:00.0`-style; None when not an address."""
    match = _CANONICAL_PCI.match(text.strip().lower())
    if match is None:
        return None
    domain = int(match.group("domain") or "0", 16)
    if domain > 0xFFFF:
        return None
    return f"{domain:04x}:{match.group('bus')}:{match.group('device')}.{match.group('function') or '0'}"


# --- bursts --------------------------------------------------------------------------------------


FATAL_WINDOW_SECONDS = 10.0
"""How long repeats of a fatal record are folded into its event: short enough that a fault seen
again after its node was repaired and released is stored and acted on (issue 29), long enough
that a storm is a handful of events a minute per GPU and code."""


@dataclass(frozen=True)
class Admission:
    admitted: bool
    repeats_suppressed: int
    """Admitted: repeats dropped since the previous admission of this key. Suppressed: repeats so far."""


class BurstDeduplicator:
    """Admit the first record per (node, family, GPU, code) in each window; count the rest.

    Times are seconds on any clock the caller chooses (event time or monotonic), as long as it
    does not go backwards for one key. Keys whose window closed are forgotten once more than
    `max_keys` are held, so memory stays bounded on a node that logs every code.
    """

    def __init__(
        self,
        window_seconds: float = 300.0,
        *,
        fatal_window_seconds: float = FATAL_WINDOW_SECONDS,
        max_keys: int = 65536,
    ) -> None:
        if window_seconds <= 0 or fatal_window_seconds <= 0:
            raise ValueError("window_seconds and fatal_window_seconds must be positive")
        self.window_seconds = window_seconds
        self.fatal_window_seconds = min(fatal_window_seconds, window_seconds)
        self.max_keys = max_keys
        self._opened: dict[tuple[str, str, str, str], tuple[float, int]] = {}

    @staticmethod
    def key(node: str, record: XidRecord) -> tuple[str, str, str, str]:
        gpu = record.pci_bdf or record.pci_address or ""
        return (node, record.family.value, gpu, record.error_code)

    def admit(self, node: str, record: XidRecord, at_seconds: float) -> Admission:
        key = self.key(node, record)
        opened = self._opened.get(key)
        window = self.fatal_window_seconds if record.is_fatal else self.window_seconds
        if opened is not None and at_seconds - opened[0] < window:
            repeats = opened[1] + 1
            self._opened[key] = (opened[0], repeats)
            return Admission(False, repeats)
        if len(self._opened) >= self.max_keys:
            self._forget_closed(at_seconds)
        self._opened[key] = (at_seconds, 0)
        return Admission(True, opened[1] if opened else 0)

    def replay(self, node: str, admitted: Iterable[tuple[str, float]], reader: Callable[[], KernelLogReader]) -> int:
        """Reopen the windows of records admitted before a restart, from their (message, time) in order.

        Why: the windows live in memory, so a monitor killed mid-storm would admit the storm's
        next line again; the stored events are what it admitted, so replaying them restores the
        windows. Returns how many messages were records again."""
        count = 0
        for message, at_seconds in admitted:
            lines, record = reader(), None
            for part in message.split("\n"):
                record = lines.feed(part) or record
            if record is not None:
                self.admit(node, record, at_seconds)
                count += 1
        return count

    def _forget_closed(self, now: float) -> None:
        closed = [k for k, (start, _) in self._opened.items() if now - start >= self.window_seconds]
        for k in closed:
            del self._opened[k]
        if len(self._opened) >= self.max_keys:
            oldest = min(self._opened, key=lambda k: self._opened[k][0])
            del self._opened[oldest]
