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

The parts: `drivers`, `catalog` (what codes mean), `catalog_files` (reading it), `lines`
(parsing), `bursts` (deduplication). This package names their public API in one place.
"""

from dsx.health.parsing.xid.bursts import FATAL_WINDOW_SECONDS, Admission, BurstDeduplicator
from dsx.health.parsing.xid.catalog import (
    BitPattern,
    CatalogEntry,
    DecodeRule,
    LostGpuMessage,
    MultiLineMessage,
    Nvlink5Decode,
    RecoveryAction,
    Verdict,
    XidCatalog,
    bit_pattern,
)
from dsx.health.parsing.xid.catalog_files import (
    CATALOG_DIR,
    CATALOG_PATH,
    PCI_PATTERN,
    WORKBOOK_BUCKETS,
    WORKBOOK_DECODE,
    WORKBOOK_FILES,
    WORKBOOK_XIDS,
    CatalogDocument,
    catalog_from_dict,
    default_catalog,
    parse_tsv,
)
from dsx.health.parsing.xid.drivers import (
    GENERATIONS,
    V2_FROM_MAJOR,
    DriverVersion,
    Family,
    Layout,
    driver_version_from_labels,
    parse_driver_version,
    resolve_driver_version,
)
from dsx.health.parsing.xid.lines import (
    SXID_REPORT_LINES,
    KernelLogReader,
    XidRecord,
    canonical_pci_address,
    driver_banner,
    iter_records,
    parse_line,
    parse_text,
)

__all__ = [
    "CATALOG_DIR",
    "CATALOG_PATH",
    "FATAL_WINDOW_SECONDS",
    "GENERATIONS",
    "PCI_PATTERN",
    "SXID_REPORT_LINES",
    "V2_FROM_MAJOR",
    "WORKBOOK_BUCKETS",
    "WORKBOOK_DECODE",
    "WORKBOOK_FILES",
    "WORKBOOK_XIDS",
    "Admission",
    "BitPattern",
    "BurstDeduplicator",
    "CatalogDocument",
    "CatalogEntry",
    "DecodeRule",
    "DriverVersion",
    "Family",
    "KernelLogReader",
    "Layout",
    "LostGpuMessage",
    "MultiLineMessage",
    "Nvlink5Decode",
    "RecoveryAction",
    "Verdict",
    "XidCatalog",
    "XidRecord",
    "bit_pattern",
    "canonical_pci_address",
    "catalog_from_dict",
    "default_catalog",
    "driver_banner",
    "driver_version_from_labels",
    "iter_records",
    "parse_driver_version",
    "parse_line",
    "parse_text",
    "parse_tsv",
    "resolve_driver_version",
]
