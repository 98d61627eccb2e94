"""`dsx certify parse nccl|training FILE`: what a workload log says, as data.

The same readers the certification engine uses, exposed so a log from anywhere (a cluster, a
GitHub issue, a vendor's README) can be checked by hand. `nccl` exits 1 when the log's verdict
is failed, `training` exits 1 when no step line was recognised; a missing file exits 3, an
unreadable one 2. Keys are camelCase (`maxBusbwGbps`, `stepTimeSeconds`), as in every dsx
document, and so are the output fields a training log's `missing` names.
"""

from __future__ import annotations

from typing import Any

import click

from dsx.cli import output as cli_output
from dsx.cli.main import run_result


@click.group("parse")
def parse() -> None:
    """Parse nccl-tests output or a training log (FILE or - for stdin)."""


@parse.command("nccl")
@click.argument("file")
@cli_output.format_options
def nccl(file: str, fmt: str, output: str | None) -> None:
    """Read nccl-tests output: per table the collective, rows, max and average busbw, status."""
    from dsx.certify.parsing import nccl as nccl_parsing
    from dsx.files import documents
    from dsx.model import schema

    log = nccl_parsing.parse(documents.read_text(file))
    cli_output.emit(schema.camel_keys(log.to_dict()), fmt, output, table=_nccl_table)
    if log.status is nccl_parsing.Status.FAILED:
        run_result(1)


@parse.command("training")
@click.argument("file")
@click.option(
    "--profile",
    "profile_name",
    default=None,
    metavar="NAME|FILE",
    help="Log profile name (see docs/parsers.md) or a profile YAML file; detected when omitted.",
)
@cli_output.format_options
def training(file: str, profile_name: str | None, fmt: str, output: str | None) -> None:
    """Read a training log: step time, tokens/s, TFLOP/s per GPU, checkpoints, restarts and goodput."""
    from dsx.certify.parsing import training as training_parsing
    from dsx.files import certify_files, documents

    profile = certify_files.log_profile(profile_name) if profile_name else None
    from dsx.model import schema

    run = training_parsing.parse(documents.read_text(file), profile)
    shown = schema.camel_keys(run.to_dict())
    shown["missing"] = [schema.camel(name) for name in shown["missing"]]
    cli_output.emit(shown, fmt, output, table=_training_table)
    if not run.steps:
        run_result(1)


def _nccl_table(data: dict[str, Any]) -> str:
    headers = ["#", "collective", "status", "rows", "max busbw GB/s", "at size B", "avg busbw GB/s", "hosts"]
    rows = [
        [
            index,
            t["collective"] or "?",
            t["status"],
            t["rowCount"],
            t["maxBusbwGbps"],
            t["maxBusbwSizeBytes"],
            t["avgBusbwGbps"],
            ",".join(t["hosts"]),
        ]
        for index, t in enumerate(data["tables"], start=1)
    ]
    text = f"status: {data['status']}\n" + cli_output.format_table(headers, rows)
    failures = [f"  line {f['line']}: [{f['kind']}] {f['text']}" for f in data["failureLines"]]
    return text + ("failure lines:\n" + "\n".join(failures) + "\n" if failures else "")


def _training_table(data: dict[str, Any]) -> str:
    headers = ["step", "step time s", "tokens/s", "TFLOP/s/GPU", "MFU %", "loss"]
    rows = [
        [s["step"], s["stepTimeSeconds"], s["tokensPerSecond"], s["tflopsPerGpu"], s["mfuPercent"], s["loss"]]
        for s in data["steps"]
    ]
    step_time = data["stepTimeSeconds"]
    goodput = data["goodput"]
    nvcre = data["goodputNvcre"]
    saves = data["checkpointSaveSeconds"]
    summary = (
        f"profile: {data['profile']} ({data['framework']})\n"
        f"steps: {data['stepCount']} ({data['firstStep']}..{data['lastStep']} of {data['totalSteps']})\n"
        f"mean step time s: {step_time['mean'] if step_time else None} (from {data['stepTimeSource']})\n"
        f"restarts: {data['restarts']}; checkpoints: {len(data['checkpoints'])}"
        f" (mean save s: {saves['mean'] if saves else None})\n"
        f"goodput (dsx): {goodput['ratio'] if goodput else None}\n"
        f"goodput (NVCRE): {nvcre['ratio'] if nvcre else None}\n"
        f"missing: {', '.join(data['missing']) or 'none'}\n"
    )
    runs = [
        [
            r["index"],
            r["startedBy"],
            r["applicationStartAt"],
            r["resumedFromStep"],
            r["firstStep"],
            r["lastStep"],
            ",".join(str(s) for s in r["warmupSteps"]) or "-",
        ]
        for r in data["runs"]
    ]
    run_table = cli_output.format_table(
        ["run", "started by", "application start", "resumed from", "first step", "last step", "warm-up"], runs
    )
    return summary + run_table + cli_output.format_table(headers, rows)
