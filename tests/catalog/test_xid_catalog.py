"""Area of concern: the Xid catalog (dsx/catalog/xid) is consistent and agrees, row by row, with
the fact sheet it was built from (tests/data/xid/catalog.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsx.errors import CatalogError
from dsx.health import xid
from dsx.model.health import RecommendedAction

FACTS = Path(__file__).resolve().parents[1] / "data" / "xid" / "catalog.md"
CATALOG = xid.default_catalog()


def fact_rows() -> list[tuple[str, int, str, str | None]]:
    """(family, code, immediate bucket, NVS class) for each row of the fact sheet's two tables."""
    rows: list[tuple[str, int, str, str | None]] = []
    text = FACTS.read_text(encoding="utf-8")
    xid_table = text.split("## Xid table")[1].split("## Bucket meanings")[0]
    for line in xid_table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", cells[0]) if cells else None
        if not match:
            continue
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        bucket = cells[3].split(" ")[0]
        rows.extend(("XID", code, bucket, cells[5]) for code in range(first, last + 1))
    sxid_table = text.split("## SXid (NVSwitch) rows")[1]
    for line in sxid_table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            bucket, klass = (part.strip() for part in cells[2].split("/"))
            rows.append(("SXID", int(cells[0]), bucket, klass))
    return rows


FACT_ROWS = fact_rows()


def test_fact_sheet_was_read() -> None:
    assert len(FACT_ROWS) >= 38  # 36 Xid codes (144-150 expanded) and 2 SXids


@pytest.mark.parametrize(("family", "code", "bucket", "klass"), FACT_ROWS, ids=lambda v: str(v))
def test_every_fact_row_is_in_the_catalog(family: str, code: int, bucket: str, klass: str | None) -> None:
    entry = CATALOG.entry(xid.Family(family), code)
    assert entry is not None, f"{family} {code} missing from xid-catalog.yaml"
    assert entry.immediate_action == bucket
    assert entry.nvs_class == klass


@pytest.mark.parametrize("entry", list(CATALOG.entries.values()), ids=lambda e: f"{e.family.value}{e.code}")
def test_row_invariants(entry: xid.CatalogEntry) -> None:
    assert entry.immediate_action in CATALOG.bucket_actions
    assert entry.sources, "every row names its sources"
    action = CATALOG.bucket_actions[entry.immediate_action]
    if entry.severity is xid.Severity.FATAL:
        assert action is not RecommendedAction.NONE
    if entry.application_level:
        assert entry.severity is xid.Severity.NONFATAL
    if entry.severity is not xid.Severity.FROM_MESSAGE:
        assert (entry.severity is xid.Severity.FATAL) == (entry.nvs_class == "FATAL")


def test_nonfatal_rows_map_to_no_action() -> None:
    for entry in CATALOG.entries.values():
        if entry.severity is xid.Severity.NONFATAL:
            assert CATALOG.bucket_actions[entry.immediate_action] is RecommendedAction.NONE, entry.code


def test_recovery_actions_cover_the_announced_texts() -> None:
    texts = {r.text: r for r in CATALOG.recovery_actions}
    assert texts["None"].action is RecommendedAction.NONE and not texts["None"].fatal
    assert texts["GPU Reset Required"].action is RecommendedAction.COMPONENT_RESET
    assert texts["Node Reboot Required"].action is RecommendedAction.RESTART_BM
    assert texts["Drain and Reset"].fatal


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["xids"][0].update(immediate_action="REBOOT_SOMETHING"), "immediate_action: 'REBOOT_SOMETHING'"),
        (lambda d: d["buckets"]["IGNORE"].update(action="IGNORE_IT"), "buckets.IGNORE.action: 'IGNORE_IT'"),
        (lambda d: d["xids"][0].update(severity="maybe"), "severity: 'maybe' is not allowed"),
        (lambda d: d["xids"].append(dict(d["xids"][0])), "code 8 appears twice"),
        (lambda d: d.update(kind="Catalog"), "expected apiVersion dsx.health/v1alpha1 and kind XidCatalog"),
    ],
)
def test_broken_catalogs_are_refused_with_the_field(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    from dsx import serialization

    data = serialization.load_mapping_file(xid.CATALOG_PATH)
    mutate(data)
    with pytest.raises(CatalogError, match=re.escape(message)):
        xid.catalog_from_dict(data, source="xid-catalog.yaml")
