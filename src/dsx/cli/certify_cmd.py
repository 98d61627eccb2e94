"""`dsx certify`: run certification workloads over node groups and report per-node verdicts."""

from __future__ import annotations

import sys
from typing import Any

import click

LOCAL_RUN_TIMEOUT_SECONDS = 120.0
"""A local run of the default sweep takes seconds; two minutes means something is wrong."""
LOCAL_STALL_TIMEOUT_SECONDS = 12.0
"""Local ranks print a row every few hundred ms; 12 s of silence is a hang, even on a busy box."""


@click.group()
def certify() -> None:
    """Run certification workloads and isolate bad nodes."""


@certify.command("run")
@click.option(
    "--recipe", "recipe_path", type=click.Path(dir_okay=False), help="Recipe whose `certification:` block applies."
)
@click.option(
    "--categories",
    "categories",
    multiple=True,
    help="Categories (comma-separated or repeated). Default: the recipe's, else nccl-all-reduce.",
)
@click.option(
    "--executor", "executor_kind", type=click.Choice(["local", "kubernetes"]), default="local", show_default=True
)
@click.option(
    "--nodes", "node_count", type=click.IntRange(min=1), help="Local: how many simulated nodes (node-0 …). Default 8."
)
@click.option("--node-selector", "selectors", multiple=True, help="KEY=VALUE a node must carry (repeatable).")
@click.option(
    "--inject", "injections", multiple=True, help="Local fault injection NODE:slow|hang|crash|corrupt (repeatable)."
)
@click.option(
    "--scale", type=click.Choice(["intra-node", "intra-group", "full-scale"]), help="Override every category's scale."
)
@click.option(
    "--ranks-per-node", type=click.IntRange(min=1), default=None, help="Ranks (GPUs) per node. Default 1 locally."
)
@click.option("--timeout-seconds", type=click.FloatRange(min=1), help="Deadline of one workload run.")
@click.option("--stall-timeout-seconds", type=click.FloatRange(min=1), help="Silence after which a run counts as hung.")
@click.option("--no-isolate", is_flag=True, help="Do not search failed groups for the bad nodes.")
@click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(dir_okay=False),
    help="Local: reuse the references kept in this file and add the ones measured now (machine-specific).",
)
@click.option(
    "--output",
    "json_path",
    type=click.Path(dir_okay=False),
    default="report.json",
    show_default=True,
    help="JSON report.",
)
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="JUnit XML report.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="HTML report. Default: beside the JSON report, with .html (report.html).",
)
@click.option("--quiet", is_flag=True, help="No live progress on stderr.")
def run(**options: Any) -> None:
    """Certify nodes: run each category over node groups, judge, isolate faults, report."""
    from dataclasses import replace
    from pathlib import Path

    from dsx import serialization
    from dsx.certify import engine, reports
    from dsx.cli import output
    from dsx.cli.main import run_result
    from dsx.errors import BadInputError, UnavailableError
    from dsx.model import certification as model

    spec = _spec(options)
    if options["executor_kind"] == "kubernetes":
        raise UnavailableError(
            "certify: the kubernetes executor is not available in this build yet; use --executor local"
        )
    from dsx.certify.local.executor import LocalExecutor

    if options["selectors"] and options["executor_kind"] == "local":
        raise BadInputError("--node-selector: local nodes carry no labels; use --nodes N")
    count = options["node_count"] or spec.target.node_count or 8
    spec = replace(spec, target=replace(spec.target, node_count=count))
    injections = tuple(model.FaultInjection.parse(text) for text in options["injections"])
    spec = replace(spec, injections=injections)
    progress = _Progress(enabled=not options["quiet"])
    stored = _load_calibration(options["calibration_path"])
    try:
        with LocalExecutor(count, injections=injections) as executor:
            result = engine.certify(spec, executor, progress=progress, calibration=stored)
    finally:
        if stored is not None and stored.references:
            output.write(serialization.dump_json(stored.to_dict()), options["calibration_path"])
    progress.done()
    document = reports.document(result)
    output.write(reports.to_json(document), options["json_path"])
    html_path = options["html_path"] or str(Path(options["json_path"]).with_suffix(".html"))
    output.write(reports.html(document), html_path)
    if options["junit_path"]:
        output.write(reports.junit(document), options["junit_path"])
    sys.stdout.write(reports.summary(document))
    sys.stdout.flush()
    run_result(0 if result.result is model.Result.PASSED else 1)


def _load_calibration(path: str | None) -> Any:
    """The calibration file's references, an empty store when the file does not exist yet, None without a path."""
    if not path:
        return None
    from pathlib import Path

    from dsx import serialization
    from dsx.certify import calibration

    if not Path(path).exists():
        return calibration.Calibration()
    return calibration.Calibration.from_dict(serialization.load_mapping_file(path), source=path)


def _spec(options: dict[str, Any]) -> Any:
    from dataclasses import replace

    from dsx.model import certification as model

    spec = model.Certification()
    if options["recipe_path"]:
        from dsx.model import recipe as recipe_model

        loaded = recipe_model.load(options["recipe_path"])
        if loaded.certification:
            spec = model.Certification.from_dict(
                loaded.certification, source=f"{options['recipe_path']}: certification"
            )
    names = [n.strip() for text in options["categories"] for n in text.split(",") if n.strip()]
    if names:
        from dsx.certify import catalog

        for name in names:
            catalog.get(name)  # unknown names fail here with the allowed list
        existing = {c.name: c for c in spec.categories}
        spec = replace(spec, categories=tuple(existing.get(n, model.CategoryRequest(n)) for n in names))
    if options["scale"]:
        spec = replace(spec, scale=model.Scale(options["scale"]))
    selectors = {}
    for text in options["selectors"]:
        key, sep, value = text.partition("=")
        if not sep or not key:
            from dsx.errors import BadInputError

            raise BadInputError(f"--node-selector: {text!r} is not KEY=VALUE")
        selectors[key] = value
    if selectors:
        spec = replace(spec, target=replace(spec.target, node_selector=selectors))
    local = options["executor_kind"] == "local"
    timeouts = spec.timeouts
    if local and not options["recipe_path"]:
        timeouts = model.Timeouts(LOCAL_RUN_TIMEOUT_SECONDS, LOCAL_STALL_TIMEOUT_SECONDS)
    elif local:
        timeouts = model.Timeouts(
            min(timeouts.run_timeout_seconds, LOCAL_RUN_TIMEOUT_SECONDS),
            min(timeouts.stall_timeout_seconds, LOCAL_STALL_TIMEOUT_SECONDS),
        )
    timeouts = model.Timeouts(
        options["timeout_seconds"] or timeouts.run_timeout_seconds,
        options["stall_timeout_seconds"] or timeouts.stall_timeout_seconds,
    )
    spec = replace(spec, timeouts=timeouts, isolate=spec.isolate and not options["no_isolate"])
    if options["ranks_per_node"]:
        spec = replace(spec, ranks_per_node=options["ranks_per_node"])
    return spec


class _Progress:
    """One line per event on stderr: category, counters, ETA, then what happened."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, event: Any) -> None:
        if not self.enabled:
            return
        eta = f" ETA {event.eta_seconds:.0f}s" if event.eta_seconds else ""
        click.echo(
            f"[{event.category}] groups {event.groups_done}/{event.groups_total} "
            f"runs {event.runs}{eta} | {event.message}",
            err=True,
        )

    def done(self) -> None:
        return None


@certify.command("categories")
def categories() -> None:
    """List the certification categories in the catalog."""
    from dsx.certify import catalog
    from dsx.cli import output

    rows = [[c.name, c.workload.value, c.scale.value, c.description] for c in catalog.load_all().values()]
    output.write(output.format_table(["name", "workload", "scale", "description"], rows), None)


def _add_parse() -> None:
    """`dsx certify parse` lives in its own module (the parsers' engineer owns it)."""
    import importlib

    try:
        module = importlib.import_module("dsx.cli.certify_parse_cmd")
    except ModuleNotFoundError as exc:
        if exc.name != "dsx.cli.certify_parse_cmd":
            raise
        return
    command = getattr(module, "parse", None)
    if isinstance(command, click.Command):
        certify.add_command(command, "parse")


_add_parse()
