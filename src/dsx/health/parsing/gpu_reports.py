"""`nvidia-smi -q` (text and XML) reports → plain findings; `dcgm_diag` reads `dcgmi diag`.

Why: a node without NVML access, a support bundle, or a pasted report still tells us about
ECC errors, pending row remaps and page retirements, throttling and diagnostic failures. The
readers turn those reports into dataclasses; `SmiReport.findings()` (here) and
`DiagReport.findings()` (`dcgm_diag`) say which observations are faults, with a suggested
fatality and RecommendedAction, and the GPU monitor builds HealthEvents from them.

Both nvidia-smi forms become one tree of (key, value, children) nodes with snake_case keys
(text `DRAM Correctable` and XML `dram_correctable` meet), so one extraction reads both and
tolerates fragments: `[...]` elisions, shell prompt lines, a missing `GPU <bus id>` header,
lower-case or ragged section titles, the pre-r535 `Clocks Throttle Reasons` name.

Suggested verdicts follow NVSentinel's DCGM mapping where it has one: a pending row remap or
pending page retirement needs a GPU reset (COMPONENT_RESET, fatal), a remap failure is an RMA
criterion (CONTACT_SUPPORT, fatal), volatile uncorrectable ECC → COMPONENT_RESET, correctable
ECC and power/thermal throttling are recorded but not fatal. The finding model and the verdict
table (`VERDICTS`) here serve both readers.
"""

from __future__ import annotations

import csv
import enum
import io
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import defusedxml
import defusedxml.ElementTree as defused

from dsx.errors import BadInputError
from dsx.health.parsing import xid
from dsx.model.health import RecommendedAction

# --- common node tree ----------------------------------------------------------------------------


@dataclass
class Node:
    key: str
    value: str | None = None
    children: list[Node] = field(default_factory=list)

    def find(self, *keys: str) -> Node | None:
        """The first descendant (depth first) whose key is one of `keys`."""
        for child in self.children:
            if child.key in keys:
                return child
            found = child.find(*keys)
            if found is not None:
                return found
        return None

    def child(self, *keys: str) -> Node | None:
        return next((c for c in self.children if c.key in keys), None)

    def walk(self) -> Iterator[Node]:
        for child in self.children:
            yield child
            yield from child.walk()


def snake(text: str) -> str:
    """`Pending Page Blacklist` → `pending_page_blacklist`; `SEC-DED` → `sec_ded`."""
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


# --- nvidia-smi ----------------------------------------------------------------------------------


class FindingKind(enum.Enum):
    ECC_UNCORRECTABLE = "ecc_uncorrectable"
    ECC_CORRECTABLE = "ecc_correctable"
    SRAM_THRESHOLD_EXCEEDED = "sram_threshold_exceeded"
    ROW_REMAP_PENDING = "row_remap_pending"
    ROW_REMAP_FAILURE = "row_remap_failure"
    RETIRED_PAGES_PENDING = "retired_pages_pending"
    CLOCKS_THROTTLED = "clocks_throttled"
    DIAG_FAILED = "diag_failed"
    DIAG_FAILED_DEPLOYMENT = "diag_failed_deployment"
    """A Deployment-category test failed: software set-up (persistence mode, environment), not the GPU."""
    DIAG_WARNING = "diag_warning"
    DIAG_SKIPPED = "diag_skipped"
    DIAG_INCOMPLETE = "diag_incomplete"


VERDICTS: dict[FindingKind, tuple[bool, RecommendedAction]] = {
    # kind: (is_fatal, recommended action) -- one row per outcome
    FindingKind.ECC_UNCORRECTABLE: (True, RecommendedAction.COMPONENT_RESET),
    FindingKind.ECC_CORRECTABLE: (False, RecommendedAction.NONE),
    FindingKind.SRAM_THRESHOLD_EXCEEDED: (True, RecommendedAction.RUN_FIELDDIAG),
    FindingKind.ROW_REMAP_PENDING: (True, RecommendedAction.COMPONENT_RESET),
    FindingKind.ROW_REMAP_FAILURE: (True, RecommendedAction.CONTACT_SUPPORT),
    FindingKind.RETIRED_PAGES_PENDING: (True, RecommendedAction.COMPONENT_RESET),
    FindingKind.CLOCKS_THROTTLED: (False, RecommendedAction.NONE),
    FindingKind.DIAG_FAILED: (True, RecommendedAction.RUN_FIELDDIAG),
    FindingKind.DIAG_FAILED_DEPLOYMENT: (False, RecommendedAction.NONE),
    FindingKind.DIAG_WARNING: (False, RecommendedAction.NONE),
    FindingKind.DIAG_SKIPPED: (False, RecommendedAction.NONE),
    FindingKind.DIAG_INCOMPLETE: (False, RecommendedAction.NONE),
}
"""The verdict dsx suggests per finding (NVSentinel's DCGM mapping where it has one)."""


@dataclass(frozen=True)
class Finding:
    """One observation worth a HealthEvent, with the verdict dsx suggests."""

    kind: FindingKind
    is_fatal: bool
    recommended_action: RecommendedAction
    message: str
    pci_bdf: str | None = None
    gpu_index: str | None = None
    """DCGM's gpu_id when the report names GPUs by index."""
    test: str | None = None

    @property
    def error_code(self) -> str:
        return self.kind.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "error_code": self.error_code,
            "is_fatal": self.is_fatal,
            "recommended_action": self.recommended_action.name,
            "message": self.message,
            "pci_bdf": self.pci_bdf,
            "gpu_index": self.gpu_index,
            "test": self.test,
        }


@dataclass(frozen=True)
class EccCounts:
    """Sums over SRAM and DRAM (or the pre-Ampere single/double-bit totals); None when all N/A."""

    volatile_correctable: int | None
    volatile_uncorrectable: int | None
    aggregate_correctable: int | None
    aggregate_uncorrectable: int | None
    sram_threshold_exceeded: bool | None = None


@dataclass(frozen=True)
class RetiredPages:
    single_bit_ecc: int | None
    double_bit_ecc: int | None
    pending: bool | None
    """Pending Page Blacklist / pending retirement: pages wait for a reboot or GPU reset."""


@dataclass(frozen=True)
class RemappedRows:
    correctable: int | None
    uncorrectable: int | None
    pending: bool | None
    failure: bool | None
    histogram_banks: dict[str, int] = field(default_factory=dict)
    """Bank remap availability: max/high/partial/low/none → number of banks."""


_BENIGN_REASONS = frozenset({"idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"})


@dataclass(frozen=True)
class ClockEventReasons:
    active: tuple[str, ...]
    """snake_case reasons reported Active (`idle`, `sw_power_cap`, `hw_thermal_slowdown`, ...)."""

    @property
    def throttling(self) -> tuple[str, ...]:
        """Active reasons that slow the GPU down (not idle, application clocks, display or sync boost)."""
        return tuple(r for r in self.active if r not in _BENIGN_REASONS)


@dataclass(frozen=True)
class GpuReport:
    pci_bus_id: str | None
    """As printed (`00000000:10:1C.0`); None in a fragment without the GPU header."""
    pci_bdf: str | None
    product_name: str | None
    uuid: str | None
    ecc: EccCounts | None
    retired_pages: RetiredPages | None
    remapped_rows: RemappedRows | None
    clock_event_reasons: ClockEventReasons | None

    def findings(self) -> list[Finding]:
        """The faults this report shows, each with the verdict of `VERDICTS`."""
        observed: list[tuple[FindingKind, str]] = []
        ecc, rows, pages, reasons = self.ecc, self.remapped_rows, self.retired_pages, self.clock_event_reasons
        if ecc and (ecc.volatile_uncorrectable or 0) > 0:
            observed.append(
                (FindingKind.ECC_UNCORRECTABLE, f"{ecc.volatile_uncorrectable} volatile uncorrectable ECC errors")
            )
        if ecc and ecc.sram_threshold_exceeded:
            observed.append((FindingKind.SRAM_THRESHOLD_EXCEEDED, "SRAM error threshold exceeded"))
        if ecc and (ecc.volatile_correctable or 0) > 0:
            observed.append(
                (FindingKind.ECC_CORRECTABLE, f"{ecc.volatile_correctable} volatile correctable ECC errors")
            )
        if rows and rows.failure:
            observed.append((FindingKind.ROW_REMAP_FAILURE, "row remapping failed"))
        if rows and rows.pending:
            observed.append((FindingKind.ROW_REMAP_PENDING, "row remap pending; reset the GPU to activate it"))
        if pages and pages.pending:
            observed.append((FindingKind.RETIRED_PAGES_PENDING, "page retirement pending; reset the GPU or reboot"))
        if reasons and reasons.throttling:
            observed.append((FindingKind.CLOCKS_THROTTLED, "clocks held back by " + ", ".join(reasons.throttling)))
        where = self.pci_bus_id or "GPU"
        return [
            Finding(kind, *VERDICTS[kind], message=f"{where}: {message}", pci_bdf=self.pci_bdf)
            for kind, message in observed
        ]


@dataclass(frozen=True)
class SmiReport:
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuReport, ...]

    def findings(self) -> list[Finding]:
        return [f for gpu in self.gpus for f in gpu.findings()]


_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
_KEY_VALUE = re.compile(r"^(?P<key>\S.*?)\s+:(?:\s+(?P<value>.*?))?\s*$")


def parse_smi(text: str, *, source: str = "nvidia-smi report") -> SmiReport:
    """Read `nvidia-smi -q` text or `nvidia-smi -q -x` XML (detected from the first `<`)."""
    stripped = text.lstrip()
    root = _xml_tree(stripped, source) if stripped.startswith("<") else _text_tree(text)
    gpus = [root] if root.key == "gpu" else [c for c in root.children if c.key == "gpu"]
    if not gpus:
        gpus = [Node("gpu", None, [c for c in root.children])]
    return SmiReport(
        driver_version=_value(root.child("driver_version")),
        cuda_version=_value(root.child("cuda_version")),
        gpus=tuple(_gpu(g) for g in gpus),
    )


def _text_tree(text: str) -> Node:
    root = Node("root")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in text.expandtabs(4).split("\n"):
        line = raw.rstrip()
        body = line.strip()
        if not body or body.startswith(("#", "$", "[...]", "...", "====")):
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack[-1][0] >= indent:
            stack.pop()
        gpu = _GPU_HEADER.match(body)
        if gpu and indent == 0:
            node = Node("gpu", gpu.group(1))
        else:
            match = _KEY_VALUE.match(body)
            node = Node(snake(match.group("key")), match.group("value") or None) if match else Node(snake(body))
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


_XML_PROLOG = re.compile(r"^\s*(?:<\?xml[^>]{0,200}\?>\s*)?(?:<!DOCTYPE[^>\[]{0,200}>\s*)?")
_ELISION = re.compile(r"^\s*(?:\.\.\.|\[\.\.\.\]|…)\s*$", re.MULTILINE)


def _xml_tree(text: str, source: str) -> Node:
    """The `-q -x` document, or a fragment of one (sections without the root, several GPUs
    pasted one after the other, `...` elisions): read as the children of a root."""
    try:
        element = _parse_xml(text, source)
    except defused.ParseError as exc:
        fragment = _ELISION.sub("", _XML_PROLOG.sub("", text, count=1))
        try:
            element = _parse_xml(f"<nvidia_smi_log>{fragment}</nvidia_smi_log>", source)
        except defused.ParseError:
            raise BadInputError(f"{source}: not well-formed nvidia-smi XML: {exc}") from exc

    def convert(e: ElementTree.Element) -> Node:
        value = (e.text or "").strip() or None
        node = Node("gpu", e.get("id")) if e.tag == "gpu" else Node(snake(e.tag), value if len(e) == 0 else None)
        node.children = [convert(c) for c in e]
        return node

    return convert(element)


def _parse_xml(text: str, source: str) -> ElementTree.Element:
    try:
        return defused.fromstring(text)  # refuses DTDs and entities: ElementTree alone expands internal ones
    except defusedxml.DefusedXmlException as exc:
        raise BadInputError(f"{source}: nvidia-smi XML declares entities or a DTD; refusing them: {exc}") from exc


def _gpu(node: Node) -> GpuReport:
    bus_id = node.value
    return GpuReport(
        pci_bus_id=bus_id,
        pci_bdf=xid.canonical_pci_address(bus_id) if bus_id else None,
        product_name=_value(node.find("product_name")),
        uuid=_value(node.find("uuid", "gpu_uuid")),
        ecc=_ecc(node.find("ecc_errors")),
        retired_pages=_retired_pages(node.find("retired_pages")),
        remapped_rows=_remapped_rows(node.find("remapped_rows")),
        clock_event_reasons=_clock_reasons(
            node.find("clocks_event_reasons", "clocks_throttle_reasons", "clocks_throttle")
        ),
    )


def _ecc(node: Node | None) -> EccCounts | None:
    if node is None:
        return None

    def totals(section: Node | None) -> tuple[int | None, int | None]:
        if section is None:
            return None, None
        correctable: list[int] = []
        uncorrectable: list[int] = []
        for child in section.children:
            if child.key in ("single_bit", "double_bit"):
                total = _int(_value(child.child("total")))
                if total is not None:
                    (correctable if child.key == "single_bit" else uncorrectable).append(total)
                continue
            count = _int(child.value)
            if count is None:
                continue
            if "uncorrectable" in child.key:
                uncorrectable.append(count)
            elif "correctable" in child.key:
                correctable.append(count)
        return (sum(correctable) if correctable else None, sum(uncorrectable) if uncorrectable else None)

    volatile = totals(node.child("volatile"))
    aggregate = totals(node.child("aggregate"))
    threshold = node.find("sram_threshold_exceeded")
    return EccCounts(volatile[0], volatile[1], aggregate[0], aggregate[1], _yes(_value(threshold)))


def _retired_pages(node: Node | None) -> RetiredPages | None:
    if node is None:
        return None
    single = node.child("single_bit_ecc") or _nested(node, "multiple_single_bit_retirement", "retired_count")
    double = node.child("double_bit_ecc") or _nested(node, "double_bit_retirement", "retired_count")
    pending_values = [_yes(c.value) for c in node.children if c.key.startswith("pending")]
    known = [p for p in pending_values if p is not None]
    return RetiredPages(_int(_value(single)), _int(_value(double)), any(known) if known else None)


def _remapped_rows(node: Node | None) -> RemappedRows | None:
    if node is None:
        return None
    histogram_node = node.child("bank_remap_availability_histogram", "row_remapper_histogram")
    histogram: dict[str, int] = {}
    for child in histogram_node.children if histogram_node else []:
        count = _int((child.value or "").split(" ")[0])
        if count is not None:
            histogram[child.key.removeprefix("row_remapper_histogram_")] = count
    return RemappedRows(
        correctable=_int(_value(node.child("correctable_error", "remapped_row_corr"))),
        uncorrectable=_int(_value(node.child("uncorrectable_error", "remapped_row_unc"))),
        pending=_yes(_value(node.child("pending", "remapped_row_pending"))),
        failure=_yes(_value(node.child("remapping_failure_occurred", "remapped_row_failure"))),
        histogram_banks=histogram,
    )


def _clock_reasons(node: Node | None) -> ClockEventReasons | None:
    if node is None:
        return None
    active = []
    for child in node.walk():
        if (child.value or "").strip().lower() == "active":
            name = re.sub(r"^clocks_(?:event|throttle)_reason_", "", child.key)
            name = {"gpu_idle": "idle", "display_clocks_setting": "display_clock_setting"}.get(name, name)
            active.append(name)
    return ClockEventReasons(tuple(active))


def _nested(node: Node, section: str, key: str) -> Node | None:
    inner = node.child(section)
    return inner.child(key) if inner else None


def _value(node: Node | None) -> str | None:
    return node.value if node is not None else None


_DIGITS = re.compile(r"[0-9]+")


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if _DIGITS.fullmatch(text) else None


def _yes(text: str | None) -> bool | None:
    if text is None:
        return None
    lowered = text.strip().lower()
    if lowered in ("yes", "true", "active"):
        return True
    if lowered in ("no", "false", "not active"):
        return False
    return None


def parse_query_csv(text: str) -> list[dict[str, str]]:
    """`nvidia-smi --query-gpu=... --format=csv` rows keyed by the header's field names."""
    body = [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith(("#", "$", "[...]"))]
    if not body:
        return []
    reader = csv.reader(io.StringIO("\n".join(body)), skipinitialspace=True)
    header = [h.strip() for h in next(reader)]
    return [dict(zip(header, (c.strip() for c in row), strict=False)) for row in reader if row]
