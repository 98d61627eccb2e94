"""`dsx sentinel parse FILE`: every Xid/SXid line and lost-GPU message of a kernel log, classified
by the catalog.

One record per matched line, or per multi-line message (line number, family, code, PCI address,
fatal or not, recommended action, NVIDIA's buckets, the NVLink5 decode, message), the same
records the kernel-log monitor turns into HealthEvents. Reads dmesg, journalctl and syslog text in
any of their prefix styles; `-` reads stdin. The NVRM banner in the log picks the NVLink5 IntrInfo
layout; `--driver-version` does when there is none. A missing file exits 3, an unreadable one or
a malformed version 2; a log without such lines prints an empty list and exits 0. Keys are
camelCase (`pciAddress`, `isFatal`, `nvlink5Decode.intrInfo`), as in every dsx document.
"""

from __future__ import annotations

from typing import Any

import click

from dsx.cli import output as cli_output


@click.command("parse")
@click.argument("file")
@click.option(
    "--driver-version",
    default=None,
    help="The NVIDIA driver that wrote the log (575.57.08) when it has no NVRM banner; picks the NVLink5 layout.",
)
@cli_output.format_options
def parse(file: str, driver_version: str | None, fmt: str, output: str | None) -> None:
    """Classify the NVRM Xid, SXid and lost-GPU lines of a kernel log (FILE or - for stdin)."""
    from dsx.files import documents
    from dsx.health.parsing import xid
    from dsx.model import schema

    driver = xid.parse_driver_version(driver_version, "configuration", "--driver-version") if driver_version else None
    records = xid.parse_text(documents.read_text(file), driver=driver)
    cli_output.emit([schema.camel_keys(r.to_dict()) for r in records], fmt, output, table=_table)


def _table(records: list[dict[str, Any]]) -> str:
    headers = ["line", "family", "code", "pci", "fatal", "action", "bucket", "message"]
    rows = [
        [
            r["line"],
            r["family"],
            r["kind"] if r["family"] == "NVRM" else r["code"],
            r["pciAddress"] or "",
            "yes" if r["isFatal"] else "no",
            r["recommendedAction"],
            r["immediateAction"],
            r["message"][:80],
        ]
        for r in records
    ]
    return cli_output.format_table(headers, rows)
