"""`dsx certify`: run certification workloads over node groups and report per-node verdicts."""

from __future__ import annotations

import re
import sys
from typing import Any

import click
import msgspec

from dsx import interrupts
from dsx.cli import snapshot_cmd
from dsx.cli.params import FiniteFloatRange

DEFAULT_NAMESPACE = "dsx-certify"
RUN_ID = re.compile(r"[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?")
DEFAULT_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
"""Kubernetes target without a selector: every node GPU Feature Discovery marked (as NVCRE)."""
LOCAL_RUN_TIMEOUT_SECONDS = 120.0
"""A local run of the default sweep takes seconds; two minutes means something is wrong."""
LOCAL_STALL_TIMEOUT_SECONDS = 10.0
"""Local ranks mark every operation they finish; 10 s without one is a hang, even on a busy box."""


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
    "--nodes",
    "node_count",
    type=click.IntRange(min=1),
    help="Local: how many simulated nodes (node-0 …), default 8. Kubernetes: at most this many eligible nodes.",
)
@click.option(
    "--node-selector",
    "selectors",
    multiple=True,
    help="Kubernetes: KEY=VALUE a node must carry (repeatable). Default nvidia.com/gpu.present=true.",
)
@click.option(
    "--inject", "injections", multiple=True, help="Local fault injection NODE:slow|hang|crash|corrupt (repeatable)."
)
@click.option(
    "--scale", type=click.Choice(["intra-node", "intra-group", "full-scale"]), help="Override every category's scale."
)
@click.option(
    "--ranks-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="Ranks (GPUs) per node. Default: 1 locally, the nodes' GPU count on Kubernetes.",
)
@click.option(
    "--interconnect",
    help="efa, infiniband, tcp, tcpxo, roce, mnnvl, nvlink, pcie: the fabric (pod set-up and thresholds). "
    "Default: detected from the nodes' devices.",
)
@click.option(
    "--workload",
    "workload",
    type=click.Choice(["catalog", "builtin"]),
    default="catalog",
    show_default=True,
    help="catalog: each category's program (nccl-tests, Megatron-LM); builtin: dsx's own torch worker "
    "(always so locally), judged against its peers only.",
)
@click.option(
    "--engine",
    type=click.Choice(["auto", "trainer", "jobs"]),
    default="auto",
    show_default=True,
    help="Kubernetes: Kubeflow Trainer TrainJobs, or plain Jobs running the builtin worker "
    "(auto: Trainer when the cluster serves TrainJobs).",
)
@click.option(
    "--gang-scheduler",
    default="auto",
    show_default=True,
    metavar="auto|none|NAME[:QUEUE]",
    help="Kubernetes: the scheduler that places each run's pods together (auto: KAI when it runs).",
)
@click.option(
    "--megatron-repo",
    metavar="URL[@REF]",
    help="Kubernetes: where the training pods clone Megatron-LM from (a mirror for air-gapped clusters).",
)
@click.option("--timeout-seconds", type=FiniteFloatRange(min=1), help="Deadline of one workload run.")
@click.option("--stall-timeout-seconds", type=FiniteFloatRange(min=1), help="Silence after which a run counts as hung.")
@click.option("--no-isolate", is_flag=True, help="Do not search failed groups for the bad nodes.")
@click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(dir_okay=False),
    help="Local: reuse the references kept in this file and add the ones measured now (machine-specific).",
)
@snapshot_cmd.kubeconfig_option
@snapshot_cmd.context_option
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True, help="Kubernetes: where runs are created.")
@click.option(
    "--image",
    help="Kubernetes: the image every workload runs in (default: the catalog's, per program and fabric; "
    "the builtin worker: ghcr.io/dsx-run/dsx-workload).",
)
@click.option("--dry-run", is_flag=True, help="Kubernetes: print the first runs' objects; create nothing.")
@click.option(
    "--run-id",
    "certification_id",
    callback=lambda _ctx, _param, value: _run_id(value),
    help="Kubernetes: the id labelling every object (default: random; fix it for a repeatable --dry-run).",
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
    from datetime import UTC, datetime
    from pathlib import Path

    from dsx.certify import reports
    from dsx.cli import output, version
    from dsx.cli.main import run_result
    from dsx.model import certification as model

    spec, ranks_given = _spec(options)
    progress = _Progress(enabled=not options["quiet"])
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if options["executor_kind"] == "kubernetes":
        result = _run_kubernetes(spec, options, progress, ranks_given=ranks_given)
        if result is None:  # --dry-run
            return
    else:
        result = _run_local(spec, options, progress)
    document = reports.document(
        result, started_at=started_at, cluster=options.get("cluster_name"), version=version.describe()
    )
    output.write(reports.to_json(document), options["json_path"])
    html_path = options["html_path"] or str(Path(options["json_path"]).with_suffix(".html"))
    output.write(reports.html(document), html_path)
    if options["junit_path"]:
        output.write(reports.junit(document), options["junit_path"])
    sys.stdout.write(reports.summary(document))
    sys.stdout.flush()
    run_result(0 if result.result is model.Result.PASSED else 1)


def _run_local(spec: Any, options: dict[str, Any], progress: _Progress) -> Any:
    import time
    from dataclasses import replace

    from dsx import serialization
    from dsx.certify import engine
    from dsx.cli import output
    from dsx.errors import BadInputError
    from dsx.executors.local.executor import LocalExecutor
    from dsx.model import certification as model

    kubernetes_only = (
        ("--node-selector", "selectors"),
        ("--dry-run", "dry_run"),
        ("--image", "image"),
        ("--run-id", "certification_id"),
        ("--megatron-repo", "megatron_repo"),
    )
    for flag, key in kubernetes_only:
        if options[key]:
            raise BadInputError(f"{flag}: applies to --executor kubernetes only (local nodes are node-0 … node-N-1)")
    for flag, key, default in (("--engine", "engine", "auto"), ("--gang-scheduler", "gang_scheduler", "auto")):
        if options[key] != default:
            raise BadInputError(f"{flag}: applies to --executor kubernetes only")
    count = options["node_count"] or spec.target.node_count or 8
    injections = tuple(model.FaultInjection.parse(text) for text in options["injections"])
    spec = replace(spec, target=msgspec.structs.replace(spec.target, node_count=count), injections=injections)
    from dsx import host

    this_host = host.hostname()
    stored = _load_calibration(options["calibration_path"], this_host)
    options["cluster_name"] = f"local: {count} simulated nodes on {this_host}"
    try:
        with LocalExecutor(count, injections=injections) as executor:
            progress.note(f"starting {count} simulated nodes: one worker server imports torch once")
            started = time.monotonic()
            executor.start()
            progress.note(f"worker server ready in {time.monotonic() - started:.1f} s")
            return engine.certify(spec, executor, progress=progress, calibration=stored)
    finally:
        if stored is not None and stored.references:
            output.write(serialization.dump_json(stored.to_dict()), options["calibration_path"])


def _run_kubernetes(spec: Any, options: dict[str, Any], progress: _Progress, *, ranks_given: bool) -> Any:
    """Certify cluster nodes through Jobs; None after --dry-run (the objects went to stdout)."""
    from dataclasses import replace

    from dsx import serialization
    from dsx.certify import engine
    from dsx.cli import output
    from dsx.errors import BadInputError
    from dsx.executors import kubernetes
    from dsx.kube import certify_jobs, jobs

    for flag, key in (("--inject", "injections"), ("--calibration", "calibration_path")):
        if options[key]:
            raise BadInputError(f"{flag}: applies to --executor local only")
    if not spec.target.node_selector and not spec.target.node_names:
        spec = replace(spec, target=msgspec.structs.replace(spec.target, node_selector=dict(DEFAULT_NODE_SELECTOR)))
    if options["node_count"]:
        spec = replace(spec, target=msgspec.structs.replace(spec.target, node_count=options["node_count"]))
    with snapshot_cmd.kube_client(options["kubeconfig"], options["context"]) as client:
        options["cluster_name"] = _cluster_name(client, options["context"])
        nodes = certify_jobs.candidate_nodes(client)
        if not ranks_given:
            ranks = kubernetes.default_ranks_per_node(n for n in nodes if spec.target.selects(n))
            spec = replace(spec, ranks_per_node=ranks)
        choice = certify_jobs.choose_engine(client, options["engine"], options["gang_scheduler"])
        progress.note(choice.note)
        if choice.engine is kubernetes.Engine.JOBS:
            spec = replace(spec, builtin=True)
        executor = kubernetes.KubernetesExecutor(
            jobs.RunLauncher(client, namespace=options["namespace"]),
            nodes,
            certification_id=options["certification_id"],
            engine=choice.engine,
            image=options["image"] or "",
            gang=choice.gang,
            megatron_source=_megatron_source(options["megatron_repo"]),
        )
        if options["dry_run"]:
            planned = engine.plan(spec, executor)
            objects = list(executor.runtimes_for(planned))
            objects += [
                obj
                for sequence, run in enumerate(planned, start=1)
                for obj in executor.render(run, kubernetes.run_name(executor.certification_id, sequence))
            ]
            namespaced = [_in_namespace(obj, options["namespace"]) for obj in objects]
            output.write(serialization.dump_yaml_documents(namespaced), None)
            return None
        click.echo(
            f"certification {executor.certification_id}: objects in namespace {options['namespace']} carry "
            f"{kubernetes.CERTIFICATION_LABEL}={executor.certification_id}; "
            f"`dsx certify cleanup --run-id {executor.certification_id}` removes any left behind",
            err=True,
        )
        with interrupts.sigterm_as_keyboard_interrupt(), executor:
            return engine.certify(spec, executor, progress=progress)


def _megatron_source(text: str | None) -> dict[str, str]:
    """`--megatron-repo URL[@REF]` as the init container's variables; {} keeps the runtime's."""
    if not text:
        return {}
    url, at, ref = text.rpartition("@") if "@" in text.split("://", 1)[-1] else (text, "", "")
    if not url.strip():
        from dsx.errors import BadInputError

        raise BadInputError(f"--megatron-repo: {text!r} is not URL[@REF]")
    return {"MEGATRON_REPO": url, **({"MEGATRON_REF": ref} if at and ref else {})}


def _in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The object as it would be created: in the runs' namespace (what `kubectl apply --dry-run=server` takes)."""
    metadata = {"namespace": namespace, **obj.get("metadata", {})}
    return {**obj, "metadata": metadata}


def _cluster_name(client: Any, context: str | None) -> str:
    """The kube context and API server a report was taken against, as far as the client knows them."""
    server = str(getattr(client, "server", "") or "")
    name = f"context {context}" if context else "current context"
    return f"{server} ({name})" if server else name


def _run_id(value: str | None) -> str | None:
    if value is not None and not RUN_ID.fullmatch(value):
        from dsx.errors import BadInputError

        raise BadInputError(f"--run-id: {value!r} must be 1-20 lowercase letters, digits or '-' (a label value)")
    return value


@certify.command("cleanup")
@click.option(
    "--run-id",
    "certification_id",
    required=True,
    callback=lambda _ctx, _param, value: _run_id(value),
    help="The certification id `certify run` printed.",
)
@snapshot_cmd.kubeconfig_option
@snapshot_cmd.context_option
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True, help="Where the runs were created.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted.")
def cleanup(certification_id: str, kubeconfig: str | None, context: str | None, namespace: str, dry_run: bool) -> None:
    """Delete every Job, Pod and Service a Kubernetes certification created (idempotent)."""
    from dsx.kube import certify_jobs

    with snapshot_cmd.kube_client(kubeconfig, context) as client:
        found = certify_jobs.delete_certification(client, namespace, certification_id, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    for name in found:
        click.echo(f"{verb} {namespace}/{name}")
    click.echo(f"{verb} {len(found)} object(s) of certification {certification_id}", err=True)


def _load_calibration(path: str | None, this_host: str) -> Any:
    """The calibration file's references, an empty store when the file does not exist yet, None without a path."""
    if not path:
        return None
    from pathlib import Path

    from dsx.certify import calibration
    from dsx.files import documents

    if not Path(path).exists():
        return calibration.Calibration(host=this_host)
    return calibration.Calibration.from_dict(documents.load_mapping_file(path), source=path, this_host=this_host)


def _spec(options: dict[str, Any]) -> tuple[Any, bool]:
    """The certification the flags and the recipe ask for, and whether ranks per node were stated."""
    from dataclasses import replace

    from dsx.model import certification as model

    spec = model.Certification()
    block: dict[str, Any] = {}
    if options["recipe_path"]:
        from dsx.files import documents

        loaded = documents.recipe(options["recipe_path"])
        if loaded.certification:
            block = dict(loaded.certification)
            spec = model.Certification.from_dict(block, source=f"{options['recipe_path']}: certification")
    names = [n.strip() for text in options["categories"] for n in text.split(",") if n.strip()]
    if names:
        from dsx.model import certify_catalog as catalog

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
        spec = replace(spec, target=msgspec.structs.replace(spec.target, node_selector=selectors))
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
    spec = replace(
        spec,
        timeouts=timeouts,
        isolate=spec.isolate and not options["no_isolate"],
        builtin=spec.builtin or options["workload"] == "builtin",
    )
    if options["interconnect"]:
        spec = replace(spec, interconnect=options["interconnect"].lower())
    ranks_given = bool(options["ranks_per_node"]) or "ranksPerNode" in block
    if options["ranks_per_node"]:
        spec = replace(spec, ranks_per_node=options["ranks_per_node"])
    return spec, ranks_given


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

    def note(self, message: str) -> None:
        """A line about the run as a whole (executor start-up), before any category."""
        if self.enabled:
            click.echo(f"[certify] {message}", err=True)

    def done(self) -> None:
        return None


@certify.command("categories")
def categories() -> None:
    """List the certification categories in the catalog, then every threshold and what it was measured on."""
    from dsx.cli import output
    from dsx.model import certification as model
    from dsx.model import certify_catalog as catalog

    shown = catalog.load_all().values()
    rows = [[c.name, c.workload_id(c.program), c.scale.value, c.description] for c in shown]
    text = output.format_table(["name", "workload", "scale", "description"], rows)
    limits = []
    for category in shown:
        kinds = (("published", category.thresholds), ("peers", category.peer_thresholds))
        for kind, rules in (*kinds, ("local", category.local_thresholds)):
            for rule in rules:
                on = rule.measured_on
                workload = on.workload or (
                    category.workload_id(model.Program.BUILTIN) if kind == "local" else "any (relative)"
                )
                limits.append(
                    [
                        category.name,
                        kind,
                        rule.metric.value,
                        rule.expression,
                        workload,
                        on.accelerator or "-",
                        on.interconnect or "-",
                        str(on.nodes) if on.nodes else "-",
                        rule.scale.value if rule.scale else "-",
                        rule.source,
                    ]
                )
    head = [
        "category",
        "kind",
        "metric",
        "expression",
        "workload",
        "accelerator",
        "interconnect",
        "nodes",
        "scale",
        "source",
    ]
    output.write(text + "\n" + output.format_table(head, limits), None)


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
