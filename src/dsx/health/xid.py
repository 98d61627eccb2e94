"""NVRM Xid and NVSwitch SXid kernel-log lines → classified records; a burst deduplicator.

Why its own module: the kernel-log monitor, `dsx sentinel parse` and the sim's injected faults
all read the same lines, and what a code means (fatal or not, what to do) must come from one
place, the catalog kept as data in `dsx/catalog/xid/xid-catalog.yaml` (built from NVIDIA's Xid
catalog; provenance in its README).

Lines come in many dresses: bare `NVRM: Xid (PCI:0000:01:00): 31, ...`, behind a `[uptime]`,
`dmesg -T` (`[Fri Aug 30 11:43:14 2024]`), `dmesg --decode --time-format=iso`
(`kern  :warn  : 2025-01-21T04:41:44,283390+00:00`), syslog with or without a host, `kernel:`
only; old drivers print no `pid=`, some print `(0000:03:00)` without `PCI:`, posters redact the
address to `PCI:...`. The parser finds the NVRM/SXid marker first and reads whatever prefix is
in front of it, so an unknown prefix costs the timestamp, never the record. `GPU has fallen off
the bus` printed without a code is recorded as Xid 79 with `code_inferred` set.

Verdicts: the catalog row's severity is `fatal`, `nonfatal` or `from_message`: Xid 154 follows
the recovery action it announces (`... to 0x4 (Drain and Reset)`), NVLink5 Xids 144-150 and
SXids follow the Fatal/Non-fatal word in the message. Application-level Xids (the program's
own fault or abort: 13, 31, 43, 45, ...) are never fatal. Codes missing from the catalog take
the catalog's `unknown` policy (escalate, as NVSentinel does).

`BurstDeduplicator` admits the first record per (node, family, GPU, code) within a window and
counts the repeats, so a storm of Xid 95 lines (NVSentinel saw 800k on one node) becomes one
event per window; "fallen off the bus" and the Xid 79 before it share a key.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dsx import catalog, serialization
from dsx.errors import CatalogError, allowed_values_message
from dsx.model.health import RecommendedAction


class Family(enum.Enum):
    XID = "XID"
    SXID = "SXID"


class Severity(enum.Enum):
    FATAL = "fatal"
    NONFATAL = "nonfatal"
    FROM_MESSAGE = "from_message"


@dataclass(frozen=True)
class CatalogEntry:
    family: Family
    code: int
    mnemonic: str
    meaning: str
    immediate_action: str
    """NVIDIA's Resolution Bucket token (Immediate Action), e.g. RESET_GPU, RESTART_APP, XID_154."""
    investigatory_action: str
    nvs_class: str
    severity: Severity
    application_level: bool
    sources: tuple[str, ...]
    notes: str = ""


@dataclass(frozen=True)
class RecoveryAction:
    """One Xid 154 recovery action: `0x4 (Drain and Reset)`."""

    code: int
    text: str
    action: RecommendedAction
    fatal: bool


@dataclass(frozen=True)
class Verdict:
    immediate_action: str
    recommended_action: RecommendedAction
    is_fatal: bool
    in_catalog: bool
    recovery_action: str | None = None


@dataclass(frozen=True)
class XidCatalog:
    entries: Mapping[tuple[Family, int], CatalogEntry]
    bucket_actions: Mapping[str, RecommendedAction]
    recovery_actions: tuple[RecoveryAction, ...]
    unknown_bucket: str
    unknown_action: RecommendedAction
    unknown_fatal: bool

    def entry(self, family: Family, code: int) -> CatalogEntry | None:
        return self.entries.get((family, code))

    def classify(self, family: Family, code: int, message: str) -> Verdict:
        """What a line with this code and message means; see the module docstring for the rules."""
        entry = self.entry(family, code)
        if entry is None:
            worded = _worded_severity(message) if family is Family.SXID else None
            if worded is False:
                return Verdict(self.unknown_bucket, RecommendedAction.NONE, False, False)
            return Verdict(self.unknown_bucket, self.unknown_action, self.unknown_fatal, False)
        action = self.bucket_actions[entry.immediate_action]
        if entry.application_level or entry.severity is Severity.NONFATAL:
            return Verdict(entry.immediate_action, RecommendedAction.NONE, False, True)
        if entry.severity is Severity.FATAL:
            return Verdict(entry.immediate_action, action, True, True)
        if entry.immediate_action == "XID_154":
            recovery = self.recovery_action(message)
            if recovery is None:
                return Verdict(
                    entry.immediate_action, self.unknown_action, self.unknown_fatal, True, _announced(message)
                )
            return Verdict(entry.immediate_action, recovery.action, recovery.fatal, True, recovery.text)
        worded = _worded_severity(message)
        fatal = entry.nvs_class == "FATAL" if worded is None else worded
        return Verdict(entry.immediate_action, action if fatal else RecommendedAction.NONE, fatal, True)

    def recovery_action(self, message: str) -> RecoveryAction | None:
        """The action an Xid 154 message moves to, matched by its text, else by its code."""
        match = _RECOVERY.search(message)
        if match is None:
            return None
        code, text = int(match.group(1), 16), (match.group(2) or "").strip().lower()
        by_text = next((r for r in self.recovery_actions if text and r.text.lower() == text), None)
        return by_text or next((r for r in self.recovery_actions if r.code == code), None)


_RECOVERY = re.compile(r"\bto (0x[0-9a-fA-F]+)(?: \(([^)]*)\))?")
_WORDED_NONFATAL = re.compile(r"\bnon-?fatal\b", re.IGNORECASE)
_WORDED_FATAL = re.compile(r"\bfatal\b", re.IGNORECASE)


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

CATALOG_PATH = catalog.path("xid", "xid-catalog.yaml")


@functools.cache
def default_catalog() -> XidCatalog:
    return load_catalog(CATALOG_PATH)


def load_catalog(path: Path) -> XidCatalog:
    data = serialization.load_mapping_file(path)
    return catalog_from_dict(data, source=str(path))


def catalog_from_dict(data: Mapping[str, Any], *, source: str) -> XidCatalog:
    """Validate the catalog: every bucket a row names is mapped, every action is a RecommendedAction."""
    if data.get("apiVersion") != "dsx.health/v1alpha1" or data.get("kind") != "XidCatalog":
        raise CatalogError(f"{source}: expected apiVersion dsx.health/v1alpha1 and kind XidCatalog")
    buckets_spec = data.get("buckets")
    if not isinstance(buckets_spec, Mapping) or not buckets_spec:
        raise CatalogError(f"{source}: buckets: expected a mapping of bucket token to action")
    buckets = {str(token): _action(spec, source, f"buckets.{token}") for token, spec in buckets_spec.items()}
    entries: dict[tuple[Family, int], CatalogEntry] = {}
    for family, key in ((Family.XID, "xids"), (Family.SXID, "sxids")):
        rows = data.get(key)
        if not isinstance(rows, list):
            raise CatalogError(f"{source}: {key}: expected a list of rows")
        for index, row in enumerate(rows):
            entry = _entry(family, row, source, f"{key}[{index}]")
            if entry.immediate_action not in buckets:
                raise CatalogError(
                    allowed_values_message(source, f"{key}[{index}].immediate_action", entry.immediate_action, buckets)
                )
            if (family, entry.code) in entries:
                raise CatalogError(f"{source}: {key}[{index}]: code {entry.code} appears twice")
            entries[(family, entry.code)] = entry
    recovery = tuple(
        _recovery(item, source, f"recovery_actions[{i}]") for i, item in enumerate(data.get("recovery_actions") or [])
    )
    unknown = data.get("unknown")
    if not isinstance(unknown, Mapping) or not isinstance(unknown.get("fatal"), bool):
        raise CatalogError(f"{source}: unknown: expected a mapping with bucket, action and fatal")
    return XidCatalog(
        entries=entries,
        bucket_actions=buckets,
        recovery_actions=recovery,
        unknown_bucket=str(unknown.get("bucket", "UNKNOWN")),
        unknown_action=_action(unknown, source, "unknown"),
        unknown_fatal=unknown["fatal"],
    )


_ENTRY_KEYS = {
    "code",
    "mnemonic",
    "meaning",
    "immediate_action",
    "investigatory_action",
    "nvs_class",
    "severity",
    "application_level",
    "sources",
    "notes",
}


def _entry(family: Family, row: object, source: str, where: str) -> CatalogEntry:
    if not isinstance(row, Mapping):
        raise CatalogError(f"{source}: {where}: expected a mapping")
    unknown = sorted(set(row) - _ENTRY_KEYS)
    if unknown:
        raise CatalogError(allowed_values_message(source, f"{where} key", unknown[0], sorted(_ENTRY_KEYS)))
    code = row.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code < 0:
        raise CatalogError(f"{source}: {where}.code: expected a non-negative integer, got {code!r}")
    severity = row.get("severity")
    if severity not in {s.value for s in Severity}:
        raise CatalogError(allowed_values_message(source, f"{where}.severity", severity, [s.value for s in Severity]))
    if row.get("nvs_class") not in ("FATAL", "NONFATAL"):
        raise CatalogError(
            allowed_values_message(source, f"{where}.nvs_class", row.get("nvs_class"), ["FATAL", "NONFATAL"])
        )
    texts = {k: row.get(k) for k in ("mnemonic", "meaning", "immediate_action", "investigatory_action")}
    for name, value in texts.items():
        if not isinstance(value, str) or not value:
            raise CatalogError(f"{source}: {where}.{name}: expected a non-empty string")
    return CatalogEntry(
        family=family,
        code=code,
        mnemonic=str(texts["mnemonic"]),
        meaning=str(texts["meaning"]),
        immediate_action=str(texts["immediate_action"]),
        investigatory_action=str(texts["investigatory_action"]),
        nvs_class=str(row["nvs_class"]),
        severity=Severity(severity),
        application_level=bool(row.get("application_level", False)),
        sources=tuple(str(s) for s in row.get("sources") or ()),
        notes=str(row.get("notes", "")),
    )


def _action(spec: object, source: str, where: str) -> RecommendedAction:
    name = spec.get("action") if isinstance(spec, Mapping) else None
    if name not in RecommendedAction.__members__:
        raise CatalogError(allowed_values_message(source, f"{where}.action", name, RecommendedAction.__members__))
    return RecommendedAction[str(name)]


def _recovery(item: object, source: str, where: str) -> RecoveryAction:
    if not isinstance(item, Mapping) or not isinstance(item.get("code"), int) or not isinstance(item.get("text"), str):
        raise CatalogError(f"{source}: {where}: expected a mapping with code, text, action and fatal")
    if not isinstance(item.get("fatal"), bool):
        raise CatalogError(f"{source}: {where}.fatal: expected true or false")
    return RecoveryAction(item["code"], item["text"], _action(item, source, where), item["fatal"])


# --- line parsing --------------------------------------------------------------------------------

_PCI = r"(?:PCI:)?(?P<pci>[^)]*)"
_XID = re.compile(r"NVRM: Xid \(" + _PCI + r"\): (?P<code>\d+)(?:, ?(?P<rest>.*))?")
_SXID = re.compile(r"(?:(?P<device>[\w-]+): )?SXid \(" + _PCI + r"\): (?P<code>\d+)(?:, ?(?P<rest>.*))?")
_FALLEN = re.compile(
    r"NVRM: (?:GPU (?:at PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?):? )?"
    r"(?P<rest>GPU has fallen off the bus\.?.*)"
)
_PID_NAME = re.compile(r"pid=(?P<pid>'<unknown>'|<unknown>|\d+)(?:, |,|$)(?:name=(?P<name>.*?)(?:, |,|$))?")
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")
_NVLINK = re.compile(r"\blink (\d+)\b", re.IGNORECASE)
_CANONICAL_PCI = re.compile(
    r"^(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{2}):(?P<device>[0-9a-f]{2})(?:\.(?P<function>[0-7]))?$"
)
_PREFIXES = (
    re.compile(r"(?P<facility>[a-z]+)\s*:(?P<level>[a-z]+)\s*:\s*"),
    re.compile(r"(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+"),
    re.compile(r"\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]\s*"),
    re.compile(r"(?P<syslog>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\s+"),
    re.compile(r"(?P<host>[^\s:\[\]]+)\s+(?=kernel:)"),
    re.compile(r"kernel:\s*"),
    re.compile(r"\[\s*(?P<uptime>\d+\.\d+)\]\s*"),
)


@dataclass(frozen=True)
class XidRecord:
    """One Xid/SXid line, read and classified."""

    line_number: int
    family: Family
    code: int
    pci_address: str | None
    """As printed (`0000:01:00`, `0000:07:00.0`); None when absent or redacted."""
    pci_bdf: str | None
    """Canonical `dddd:bb:dd.f` lower case, for matching against NVML and nvidia-smi bus ids."""
    message: str
    verdict: Verdict
    mnemonic: str | None
    application_level: bool
    code_inferred: bool = False
    """True for `GPU has fallen off the bus` printed without an Xid number (recorded as 79)."""
    pid: int | None = None
    process_name: str | None = None
    device: str | None = None
    """The NVSwitch device for SXids (`nvidia-nvswitch2`)."""
    primary_code: int | None = None
    """Xid 45's `caused by previous Xid N`."""
    nvlink: int | None = None
    hostname: str | None = None
    timestamp: datetime | None = None
    """From a dated prefix (ISO, dmesg -T); naive when the line carries no zone. Syslog prefixes have no year: None."""
    timestamp_text: str | None = None
    uptime_seconds: float | None = None
    raw: str = ""

    @property
    def is_fatal(self) -> bool:
        return self.verdict.is_fatal

    @property
    def recommended_action(self) -> RecommendedAction:
        return self.verdict.recommended_action

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line_number,
            "family": self.family.value,
            "code": self.code,
            "pci_address": self.pci_address,
            "pci_bdf": self.pci_bdf,
            "is_fatal": self.verdict.is_fatal,
            "recommended_action": self.verdict.recommended_action.name,
            "immediate_action": self.verdict.immediate_action,
            "message": self.message,
            "mnemonic": self.mnemonic,
            "in_catalog": self.verdict.in_catalog,
            "application_level": self.application_level,
            "code_inferred": self.code_inferred,
            "recovery_action": self.verdict.recovery_action,
            "primary_code": self.primary_code,
            "nvlink": self.nvlink,
            "pid": self.pid,
            "process_name": self.process_name,
            "device": self.device,
            "hostname": self.hostname,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "timestamp_text": self.timestamp_text,
            "uptime_seconds": self.uptime_seconds,
        }


def parse_text(text: str, xid_catalog: XidCatalog | None = None) -> list[XidRecord]:
    """Every Xid/SXid record in a kernel log, with 1-based line numbers."""
    return list(iter_records(text.split("\n"), xid_catalog))


def iter_records(raw_lines: Iterator[str] | list[str], xid_catalog: XidCatalog | None = None) -> Iterator[XidRecord]:
    for number, line in enumerate(raw_lines, start=1):
        record = parse_line(line, number, xid_catalog)
        if record is not None:
            yield record


def parse_line(line: str, line_number: int = 0, xid_catalog: XidCatalog | None = None) -> XidRecord | None:
    """The record of one kernel-log line, or None when it reports no Xid/SXid."""
    if "Xid" not in line and "fallen off the bus" not in line:
        return None
    line = line.rstrip("\r\n")
    family, inferred = Family.XID, False
    match = _XID.search(line)
    if match is None:
        match = _SXID.search(line)
        family = Family.SXID
    if match is None:
        match = _FALLEN.search(line)
        family, inferred = Family.XID, True
    if match is None:
        return None
    fields = match.groupdict()
    code = 79 if inferred else int(fields["code"])
    rest = (fields.get("rest") or "").strip()
    pid = name = None
    if family is Family.XID and not inferred:
        pid_match = _PID_NAME.match(rest)
        if pid_match:
            pid_text, name = pid_match.group("pid"), pid_match.group("name")
            pid = int(pid_text) if pid_text.isdigit() else None
            name = None if name in (None, "<unknown>", "'<unknown>'") else name
            rest = rest[pid_match.end() :].strip()
    pci = (fields.get("pci") or "").strip() or None
    if pci is not None and "..." in pci:
        pci = None
    verdict = (xid_catalog or default_catalog()).classify(family, code, rest)
    entry = (xid_catalog or default_catalog()).entry(family, code)
    caused_by = _CAUSED_BY.search(rest) if code == 45 else None
    nvlink = _NVLINK.search(rest)
    prefix = _read_prefix(line[: match.start()])
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
        code_inferred=inferred,
        pid=pid,
        process_name=name,
        device=fields.get("device"),
        primary_code=int(caused_by.group(1)) if caused_by else None,
        nvlink=int(nvlink.group(1)) if nvlink else None,
        raw=line,
        **prefix,
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

    def __init__(self, window_seconds: float = 300.0, *, max_keys: int = 65536) -> None:
        if window_seconds <= 0:
            raise ValueError("window_seconds must be positive")
        self.window_seconds = window_seconds
        self.max_keys = max_keys
        self._opened: dict[tuple[str, str, str, int], tuple[float, int]] = {}

    @staticmethod
    def key(node: str, record: XidRecord) -> tuple[str, str, str, int]:
        gpu = record.pci_bdf or record.pci_address or ""
        return (node, record.family.value, gpu, record.code)

    def admit(self, node: str, record: XidRecord, at_seconds: float) -> Admission:
        key = self.key(node, record)
        opened = self._opened.get(key)
        if opened is not None and at_seconds - opened[0] < self.window_seconds:
            repeats = opened[1] + 1
            self._opened[key] = (opened[0], repeats)
            return Admission(False, repeats)
        if len(self._opened) >= self.max_keys:
            self._forget_closed(at_seconds)
        self._opened[key] = (at_seconds, 0)
        return Admission(True, opened[1] if opened else 0)

    def _forget_closed(self, now: float) -> None:
        closed = [k for k, (start, _) in self._opened.items() if now - start >= self.window_seconds]
        for k in closed:
            del self._opened[k]
        if len(self._opened) >= self.max_keys:
            oldest = min(self._opened, key=lambda k: self._opened[k][0])
            del self._opened[oldest]
