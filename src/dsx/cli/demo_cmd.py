"""`dsx demo`: the whole lifecycle on a simulated cluster, with a summary table and an HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

DEFAULT_OUTPUT = "demo-out"


@click.command()
@click.option(
    "--output",
    "output_dir",
    default=DEFAULT_OUTPUT,
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for every artifact, the timeline and report.html.",
)
@click.option(
    "--summary-json",
    "summary_json",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the summary (isolated, remediated, artifacts, steps) to this JSON file.",
)
@click.option("--keep", is_flag=True, help="Leave the simulated cluster running at the end.")
@click.option("--name", "cluster_name", default="dsx-demo", show_default=True, help="Name of the dsx sim cluster.")
@click.option("--slow-node", default="gpu-node-05", show_default=True, help="Node made slow during certification.")
@click.option("--xid-node", default="gpu-node-02", show_default=True, help="Node that gets Xid 79 in operation.")
@click.option(
    "--categories",
    default=None,
    metavar="NAMES",
    help="Certification categories, comma-separated. Default: the recipe's (nccl-loopback, nccl-all-reduce, training).",
)
def demo(
    output_dir: str,
    summary_json: str | None,
    keep: bool,
    cluster_name: str,
    slow_node: str,
    xid_node: str,
    categories: str | None,
) -> None:
    """Run the whole lifecycle on a simulated cluster.

    Recipe (eks/h100/ubuntu/training/kubeflow) → Argo CD bundle → sign → verify → dsx sim with
    8 H100 nodes → install → sentinel → validate → certify with one slow node, isolated → Xid 79
    on another node → quarantine → drain → remediate → re-certify → uncordon. Progress goes to
    stderr, the summary table to stdout; everything lands in --output, with report.html
    linking it all. Exit 0 only when every step did what it should.
    """
    from dsx.cli import output as cli_output
    from dsx.cli.main import run_result
    from dsx.demo import lifecycle, report
    from dsx.errors import BadInputError

    chosen = tuple(c.strip() for c in (categories or "").split(",") if c.strip())
    if categories is not None and not chosen:
        raise BadInputError("dsx demo: --categories: give at least one category")
    options = lifecycle.DemoOptions(
        output_dir=Path(output_dir),
        cluster_name=cluster_name,
        keep=keep,
        slow_node=slow_node,
        xid_node=xid_node,
        categories=chosen,
    )
    document = lifecycle.run(options, lambda line: click.echo(line, err=True))
    if summary_json:
        cli_output.write(report.to_json(document), summary_json)
    click.echo(summary_table(document), nl=False)
    run_result(0 if document["result"] == "passed" else 1)


def summary_table(document: dict[str, Any]) -> str:
    from dsx.cli import output as cli_output

    rows = [[s["title"], s["status"], f"{s['durationSeconds']:.1f}s", s["detail"]] for s in document["steps"]]
    text = "\n" + cli_output.format_table(["step", "status", "took", "what happened"], rows)
    for entry in document["isolated"]:
        text += f"isolated:   {entry['node']}  {entry['reason']}: {entry['message']}\n"
    for entry in document["remediated"]:
        text += f"remediated: {entry['node']}  {' → '.join(entry['states'])}\n"
    if "report" in document["artifacts"]:
        text += f"report:     {document['artifacts']['report']}\n"
    minutes, seconds = divmod(round(document["durationSeconds"]), 60)
    text += f"result:     {document['result'].upper()} in {minutes}m{seconds:02d}s\n"
    return text
