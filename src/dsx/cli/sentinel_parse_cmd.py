"""`dsx sentinel parse FILE`: every Xid/SXid line of a kernel log, classified by the catalog.

One record per matched line (line number, family, code, PCI address, fatal or not, recommended
action, message), the same records the kernel-log monitor turns into HealthEvents. Reads dmesg,
journalctl and syslog text in any of their prefix styles; `-` reads stdin. A missing file exits
3, an unreadable one 2; a log without Xid lines prints an empty list and exits 0.
"""

from __future__ import annotations

from typing import Any

import click

from dsx.cli import output as cli_output


@click.command("parse")
@click.argument("file")
@cli_output.format_options
def parse(file: str, fmt: str, output: str | None) -> None:
    """Classify the NVRM Xid and SXid lines of a kernel log (FILE or - for stdin)."""
    from dsx import serialization
    from dsx.health import xid

    records = xid.parse_text(serialization.read_text(file))
    cli_output.emit([r.to_dict() for r in records], fmt, output, table=_table)


def _table(records: list[dict[str, Any]]) -> str:
    headers = ["line", "family", "code", "pci", "fatal", "action", "bucket", "message"]
    rows = [
        [
            r["line"],
            r["family"],
            r["code"],
            r["pci_address"] or "",
            "yes" if r["is_fatal"] else "no",
            r["recommended_action"],
            r["immediate_action"],
            r["message"][:80],
        ]
        for r in records
    ]
    return cli_output.format_table(headers, rows)
