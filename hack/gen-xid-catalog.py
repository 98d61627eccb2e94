#!/usr/bin/env python3
"""Regenerate dsx's copy of NVIDIA's Xid catalog workbook from its TSV exports.

    python hack/gen-xid-catalog.py [--from DIR]

DIR defaults to ../shared/reference/nvidia-xid-catalog (xids.tsv, xid-144-150-decode.tsv,
buckets.tsv, exported from NVIDIA's Xid-Catalog.xlsx; see the README there). Writes, under
src/dsx/catalog/xid/:

- workbook-xids.tsv            every Xid row (code, mnemonic, GPU generations, buckets, Xid 154 linkage)
- workbook-nvlink5-decode.tsv  every row of the "Xid 144-150 Decode" sheet
- workbook-buckets.tsv         the resolution bucket list, each token once, in sheet order

Cells are stripped of surrounding blanks and nothing else changes, so a diff of the output
after a new workbook shows exactly what NVIDIA changed. dsx's own judgement (which
RecommendedAction each bucket means, annotations, SXids, lost-GPU messages) stays in
xid-catalog.yaml; tests/catalog/test_xid_catalog.py holds both against the TSV exports.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "reference" / "nvidia-xid-catalog"
TARGET = REPO / "src" / "dsx" / "catalog" / "xid"
FILES = {
    "xids.tsv": "workbook-xids.tsv",
    "xid-144-150-decode.tsv": "workbook-nvlink5-decode.tsv",
    "buckets.tsv": "workbook-buckets.tsv",
}


def read(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [[cell.strip() for cell in row] for row in csv.reader(handle, delimiter="\t")]
    if not rows:
        raise SystemExit(f"{path}: empty")
    header, body = rows[0], [row for row in rows[1:] if any(row)]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise SystemExit(f"{path}: line {number}: {len(row)} cells, header has {len(header)}")
    return header, body


def write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, default=DEFAULT_SOURCE)
    args = parser.parse_args(argv)
    for source_name, target_name in FILES.items():
        header, rows = read(args.source / source_name)
        if source_name == "buckets.tsv":  # the sheet lists INVESTIGATE_SW_USER twice
            seen: set[str] = set()
            rows = [row for row in rows if not (row[0] in seen or seen.add(row[0]))]
        write(TARGET / target_name, header, rows)
        print(f"{TARGET / target_name}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
