"""Kernel-log lines → `XidRecord`s: NVRM Xid, NVSwitch SXid reports and lost-GPU messages.

The parser finds the NVRM/SXid marker first and reads whatever prefix is in front of it, so an
unknown prefix costs the timestamp, never the record. Every pattern is linear and every number
bounded, so any input gives records or nothing, quickly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from dsx.health.parsing.xid.catalog import LostGpuMessage, MultiLineMessage, Verdict, XidCatalog
from dsx.health.parsing.xid.catalog_files import default_catalog
from dsx.health.parsing.xid.drivers import DriverVersion, Family, parse_driver_version
from dsx.model.health import RecommendedAction

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
