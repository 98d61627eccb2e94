"""Area of concern: dsx's Xid catalog (dsx/catalog/xid) is NVIDIA's workbook, both ways: every row
of the workbook's TSV exports (tests/data/xid/workbook) is in the catalog with the
same facts and nothing else is; every bucket is mapped to an action and every mapping is used;
and the judgement dsx adds (bucket actions, annotations, lost-GPU messages) keeps its invariants."""

from __future__ import annotations

import csv
import logging
import re
from pathlib import Path

import pytest

from dsx.errors import CatalogError
from dsx.files import documents, health_files
from dsx.health.parsing import xid
from dsx.model.health import RecommendedAction

REPO = Path(__file__).resolve().parents[2]
WORKBOOK = REPO / "tests" / "data" / "xid" / "workbook"
FACTS = REPO / "tests" / "data" / "xid" / "catalog.md"
README = xid.CATALOG_DIR / "README.md"
CATALOG = xid.default_catalog()


def tsv(name: str) -> list[dict[str, str]]:
    with (WORKBOOK / name).open(encoding="utf-8", newline="") as handle:
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(handle, delimiter="\t")]


XIDS = tsv("xids.tsv")
DECODE = tsv("xid-144-150-decode.tsv")
BUCKETS = [row["bucket"] for row in tsv("buckets.tsv")]


def test_the_workbook_exports_were_read() -> None:
    assert (len(XIDS), len(DECODE), len(set(BUCKETS))) == (172, 95, 32)


@pytest.mark.parametrize(
    ("shared", "packaged"),
    [(s, p) for s, p in (("xids.tsv", xid.WORKBOOK_XIDS), ("xid-144-150-decode.tsv", xid.WORKBOOK_DECODE))],
)
def test_the_packaged_tsvs_are_the_workbook_exports(shared: str, packaged: str) -> None:
    """hack/gen-xid-catalog.py output is current: rerun it when the workbook changes."""
    assert health_files.read_tsv(xid.CATALOG_DIR / packaged) == tsv(shared)


def test_the_packaged_bucket_list_is_the_workbooks_once_each() -> None:
    assert list(CATALOG.workbook_buckets) == list(dict.fromkeys(BUCKETS))


@pytest.mark.parametrize("row", XIDS, ids=lambda r: f"xid{r['code']}")
def test_every_workbook_xid_is_in_the_catalog_with_its_facts(row: dict[str, str]) -> None:
    entry = CATALOG.entry(xid.Family.XID, int(row["code"]))
    assert entry is not None
    assert entry.mnemonic == row["mnemonic"]
    assert entry.generations == tuple(g for g in xid.GENERATIONS if row[g] == "YES")
    assert entry.immediate_action == (row["immediate_bucket"] or CATALOG.unspecified_bucket)
    assert entry.investigatory_action == row["investigatory_bucket"]
    assert entry.xid154_linkage == row["xid154_linkage"]


def test_the_catalog_has_no_xid_the_workbook_lacks() -> None:
    codes = {code for family, code in CATALOG.entries if family is xid.Family.XID}
    assert codes == {int(row["code"]) for row in XIDS}


def test_every_decode_row_is_a_rule_in_order() -> None:
    rules = [rule for code in sorted(CATALOG.decode_rules) for rule in CATALOG.decode_rules[code]]
    assert len(rules) == len(DECODE)
    for rule, row in zip(rules, DECODE, strict=True):
        assert (rule.xid, rule.subcode, rule.bucket, rule.second_bucket) == (
            int(row["xid"]),
            row["subcode"],
            row["recovery_bucket"],
            row["action2_bucket"],
        )
        assert rule.patterns[xid.Layout.V1].text == row["v1_intrinfo_pattern_pre_r575"]
        assert rule.patterns[xid.Layout.V2].text == row["v2_intrinfo_pattern_r575_plus"]
        assert {layout: p.text for layout, p in rule.second_patterns.items()} == {
            layout: text
            for layout, text in ((xid.Layout.V1, row["v1_action2_pattern"]), (xid.Layout.V2, row["v2_action2_pattern"]))
            if text
        }
        statuses = [int(s, 16) for s in row["error_status_hex"].split("/") if s]
        assert list(rule.statuses) == statuses
        assert (rule.investigatory_action, rule.severity, rule.hw_sw) == (
            row["investigatory_bucket"],
            row["severity"],
            row["hw_sw"],
        )


def test_every_workbook_bucket_is_mapped_to_an_action() -> None:
    used = set(BUCKETS)
    used |= {row[k] for row in XIDS for k in ("immediate_bucket", "investigatory_bucket")}
    used |= {row[k] for row in DECODE for k in ("recovery_bucket", "action2_bucket", "investigatory_bucket")}
    used.discard("")
    assert used - set(CATALOG.bucket_actions) == set()


def test_every_mapping_is_used() -> None:
    used = set(BUCKETS) | {CATALOG.unknown_bucket, CATALOG.unspecified_bucket}
    used |= {e.immediate_action for e in CATALOG.entries.values()}
    used |= {e.investigatory_action for e in CATALOG.entries.values() if e.family is xid.Family.XID}
    used |= {r.bucket for rules in CATALOG.decode_rules.values() for r in rules}
    used |= {r.second_bucket for rules in CATALOG.decode_rules.values() for r in rules}
    used |= {r.investigatory_action for rules in CATALOG.decode_rules.values() for r in rules}
    used |= {m.bucket for m in CATALOG.lost_gpu}
    assert set(CATALOG.bucket_actions) - used == set()


@pytest.mark.parametrize(
    "row", [r for r in XIDS if r["immediate_bucket"] in ("RESTART_APP", "IGNORE")], ids=lambda r: f"xid{r['code']}"
)
@pytest.mark.parametrize("message", ["", "Fatal error", "Non-fatal", "pid=1, name=x, GPU has fallen off the bus"])
def test_restart_app_and_ignore_never_quarantine(row: dict[str, str], message: str) -> None:
    verdict = CATALOG.classify(xid.Family.XID, int(row["code"]), message)
    assert (verdict.recommended_action, verdict.is_fatal) == (RecommendedAction.NONE, False)


def test_the_examples_of_the_issue() -> None:
    for code in (11, 69, *range(126, 136), 152, 157, 160):
        assert not CATALOG.classify(xid.Family.XID, code, "").is_fatal, code
    assert CATALOG.classify(xid.Family.XID, 151, "").recommended_action is RecommendedAction.RESTART_VM


def test_fatal_exactly_when_there_is_an_action() -> None:
    for entry in CATALOG.entries.values():
        verdict = CATALOG.classify(entry.family, entry.code, "")
        assert verdict.is_fatal == (verdict.recommended_action is not RecommendedAction.NONE), entry.code
        if entry.application_level:
            assert not verdict.is_fatal, entry.code


def fact_rows() -> list[tuple[str, int, str]]:
    """(family, code, immediate bucket) of the team's earlier fact sheet (gpud, NVSentinel, docs)."""
    rows: list[tuple[str, int, str]] = []
    text = FACTS.read_text(encoding="utf-8")
    for line in text.split("## Xid table")[1].split("## Bucket meanings")[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", cells[0]) if cells else None
        if match:
            first, last = int(match.group(1)), int(match.group(2) or match.group(1))
            rows.extend(("XID", code, cells[3].split(" ")[0]) for code in range(first, last + 1))
    for line in text.split("## SXid (NVSwitch) rows")[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            rows.append(("SXID", int(cells[0]), cells[2].split("/")[0].strip()))
    return rows


@pytest.mark.parametrize(("family", "code", "bucket"), fact_rows(), ids=lambda v: str(v))
def test_the_earlier_fact_sheet_agrees(family: str, code: int, bucket: str) -> None:
    entry = CATALOG.entry(xid.Family(family), code)
    assert entry is not None and entry.immediate_action == bucket


def test_recovery_actions_cover_the_announced_texts() -> None:
    texts = {r.text: r.action for r in CATALOG.recovery_actions}
    assert texts == {
        "None": RecommendedAction.NONE,
        "GPU Reset Required": RecommendedAction.COMPONENT_RESET,
        "Node Reboot Required": RecommendedAction.RESTART_BM,
        "Drain and Reset": RecommendedAction.COMPONENT_RESET,
    }


def test_every_lost_gpu_source_is_explained_in_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    for message in CATALOG.lost_gpu:
        assert f"`{message.id}`" in readme
        for tag in message.sources:
            assert f"| {tag} |" in readme, (message.id, tag)


def test_lost_gpu_patterns_use_bounded_repeats_only() -> None:
    """Regexes kept as data stay linear: `*` and `+` could backtrack across a huge line."""
    patterns = [p for m in CATALOG.lost_gpu for p in m.patterns]
    patterns += [p for m in CATALOG.multi_line for p in (m.opener, m.closer)]
    for pattern in patterns:
        assert not re.search(r"(?<!\\)[*+]", pattern.pattern), pattern.pattern


def load_raw() -> tuple[dict[str, object], dict[str, list[dict[str, str]]]]:
    data = documents.load_mapping_file(xid.CATALOG_PATH)
    workbook = {
        name: health_files.read_tsv(xid.CATALOG_DIR / name)
        for name in (xid.WORKBOOK_XIDS, xid.WORKBOOK_DECODE, xid.WORKBOOK_BUCKETS)
    }
    return data, workbook


def test_old_snake_case_catalog_keys_read_the_same_with_one_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    data, workbook = load_raw()
    renames = {"gpuLost": "gpu_lost", "multiLine": "multi_line", "recoveryActions": "recovery_actions"}
    old = {renames.get(key, key): value for key, value in data.items()}
    old["sxids"] = [
        {"nvs_class" if key == "nvsClass" else key: value for key, value in row.items()}
        for row in old["sxids"]  # type: ignore[attr-defined]
    ]
    with caplog.at_level(logging.WARNING, logger="dsx.health.parsing.xid"):
        catalog = xid.catalog_from_dict(old, workbook, source="old.yaml")
    assert catalog == xid.default_catalog()
    warned = [r.getMessage().split(": ")[1] for r in caplog.records]
    assert warned[:3] == ["recovery_actions", "gpu_lost", "multi_line"]
    assert warned[3:] == [f"sxids[{i}].nvs_class" for i in range(len(warned) - 3)]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d, w: w[xid.WORKBOOK_XIDS][0].update(immediate_bucket="REBOOT_IT"), "immediate_bucket: 'REBOOT_IT'"),
        (lambda d, w: d["buckets"]["IGNORE"].update(action="IGNORE_IT"), "buckets.IGNORE.action: 'IGNORE_IT'"),
        (lambda d, w: w[xid.WORKBOOK_XIDS].append(dict(w[xid.WORKBOOK_XIDS][0])), "Xid 1 appears twice"),
        (lambda d, w: d.update(kind="Catalog"), "expected apiVersion dsx.health/v1alpha1 and kind XidCatalog"),
        (lambda d, w: d["annotations"].append({"code": 9999}), "annotations: Xid 9999 is not in"),
        (
            lambda d, w: w[xid.WORKBOOK_DECODE][0].update(v1_intrinfo_pattern_pre_r575="--2"),
            "'--2': expected up to 64 characters of 0, 1 and -",
        ),
        (lambda d, w: w[xid.WORKBOOK_DECODE][0].update(error_status_hex="one"), "error_status_hex: 'one'"),
        (lambda d, w: d["gpuLost"][0].update(patterns=["(unclosed"]), "gpuLost[0].patterns[0]"),
        (
            lambda d, w: d["gpuLost"][0].update(sources=[]),
            "xid-catalog.yaml: gpuLost[0].sources: [] is out of range; allowed: a list of length at least 1",
        ),
        (
            lambda d, w: d["gpuLost"][1].update(markers=[""]),
            "xid-catalog.yaml: gpuLost[1].markers[0]: must not be empty",
        ),
        (lambda d, w: d["multiLine"][0].update(id="NOPE"), "multiLine[0].id: 'NOPE' is not allowed"),
        (
            lambda d, w: d["multiLine"][0].update(maxLines=40),
            "xid-catalog.yaml: multiLine[0].maxLines: 40 is out of range; allowed: an integer at most 16",
        ),
        (
            lambda d, w: d["sxids"][0].update(nvsClass="SEVERE"),
            "xid-catalog.yaml: sxids[0]: nvsClass: 'SEVERE' is not allowed; allowed values: FATAL, NONFATAL",
        ),
        (lambda d, w: d["buckets"].update(NEW={"act": "NONE"}), "xid-catalog.yaml: buckets.NEW: field: 'act'"),
        (lambda d, w: d.update(colour="red"), "xid-catalog.yaml: field: 'colour' is not allowed; allowed values:"),
    ],
)
def test_broken_catalogs_are_refused_with_the_field(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data, workbook = load_raw()
    mutate(data, workbook)
    with pytest.raises(CatalogError, match=re.escape(message)):
        xid.catalog_from_dict(data, workbook, source="xid-catalog.yaml")
