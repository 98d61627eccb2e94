"""The Xid catalog as dsx uses it: entries, recovery actions, NVLink5 decode rules, verdicts.

What a code means (fatal or not, what to do) comes from here alone; `catalog_files` reads it
from `dsx/catalog/xid/` (NVIDIA's workbook as TSVs plus dsx's judgement over it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dsx.errors import CatalogError
from dsx.health.parsing.xid.drivers import DriverVersion, Family, Layout
from dsx.model.health import RecommendedAction


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
