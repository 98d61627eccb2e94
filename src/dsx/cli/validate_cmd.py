"""`dsx validate` and `dsx diff`: hold a cluster (or its snapshot) against a recipe.

`validate` prints a table, writes CTRF JSON (`--output`) and JUnit XML (`--junit`), and with
`--attest` signs a validity attestation beside the report, and exits 1 when a check failed
(`--no-fail-on-error` only reports). `diff` lists drift and exits 1 on drift when asked to
(`--fail-on-drift`). Both serve as CI gates.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import msgspec

from dsx import interrupts
from dsx.cli import certify_cmd, snapshot_cmd
from dsx.cli import output as cli_output
from dsx.errors import BadInputError

PHASES = ("readiness", "deployment", "conformance", "performance", "all")


def _phases(values: tuple[str, ...]) -> list[Any]:
    from dsx.validation import results

    names = [v.strip().lower() for value in values for v in value.split(",") if v.strip()] or ["all"]
    for name in names:
        if name not in PHASES:
            raise BadInputError(f"--phase: {name!r} is not allowed; allowed values: {', '.join(PHASES)}")
    if "all" in names:
        return list(results.PHASE_ORDER)
    return [results.Phase(n) for n in names]


def _snapshot_and_reader(
    snapshot_files: tuple[str, ...], kubeconfig: str | None, context: str | None, stack: Any
) -> tuple[Any, Any]:
    """The snapshot to judge, and the live reader (None when validating files alone).

    Files alone: they are merged (one cluster snapshot plus node snapshots). With --kubeconfig,
    or with no file at all, the cluster snapshot is taken live and the files must be node snapshots.
    """
    from dsx.model import snapshot as snapshot_model

    files = snapshot_cmd.load_snapshots(snapshot_files)
    if files and kubeconfig is None:
        return snapshot_model.merge(files), None
    client = stack.enter_context(snapshot_cmd.kube_client(kubeconfig, context))
    live = snapshot_cmd.cluster_snapshot(client)
    snap = snapshot_model.merge([live, *files]) if files else live
    return snap, client


EXECUTORS = ("kubernetes", "local")
NO_CLUSTER = (
    "needs a live cluster (--kubeconfig) to run certification workloads on its GPU nodes; "
    "--executor local runs the same categories on this machine instead"
)


def _progress(event: Any) -> None:
    click.echo(f"[{event.category}] {event.message}", err=True)


def _certification(block: Mapping[str, Any]) -> Any:
    from dsx.model import certification as model

    return model.Certification.from_dict(block, source="recipe: certification")


def kubernetes_certify(client: Any, launcher: Any, *, namespace: str, image: str | None = None) -> Any:
    """Certify the cluster's GPU nodes with dsx certify's Kubernetes executor (TrainJobs pinned to the nodes).

    Like `dsx certify run --executor kubernetes --recipe R`: nodes GPU Feature Discovery marked
    unless the recipe targets others, one rank per allocatable GPU unless it says `ranksPerNode`.
    `launcher` creates, awaits, reads and deletes the runs in `namespace` (a `dsx.kube.jobs.RunLauncher`).
    """

    def certify(block: Mapping[str, Any], snap: Any) -> Any:
        from dataclasses import replace

        from dsx.certify import engine
        from dsx.executors import kubernetes
        from dsx.kube import certify_jobs

        spec = _certification(block)
        if not spec.target.node_selector and not spec.target.node_names:
            selector = dict(certify_cmd.DEFAULT_NODE_SELECTOR)
            spec = replace(spec, target=msgspec.structs.replace(spec.target, node_selector=selector))
        nodes = certify_jobs.candidate_nodes(client)
        if "ranksPerNode" not in block:
            targeted = (n for n in nodes if spec.target.selects(n))
            spec = replace(spec, ranks_per_node=kubernetes.default_ranks_per_node(targeted))
        choice = certify_jobs.choose_engine(client)
        click.echo(f"[certify] {choice.note}", err=True)
        executor = kubernetes.KubernetesExecutor(
            launcher, nodes, engine=choice.engine, gang=choice.gang, image=image or ""
        )
        click.echo(
            f"certification {executor.certification_id}: runs in namespace {namespace}; "
            f"`dsx certify cleanup --run-id {executor.certification_id}` removes any left behind",
            err=True,
        )
        with interrupts.sigterm_as_keyboard_interrupt(), executor:  # as `dsx certify run`: SIGTERM cleans up too
            return engine.certify(spec, executor, progress=_progress)

    return certify


def local_certify(block: Mapping[str, Any], snap: Any) -> Any:
    """Run the recipe's categories on this machine, one simulated node per targeted snapshot GPU node (capped).

    Like `dsx certify run --executor local --recipe R`: real collectives between local processes,
    judged against the catalog's local floors (the recipe's explicit thresholds still apply).
    """
    from dataclasses import replace

    from dsx.certify import engine
    from dsx.executors.local.executor import LocalExecutor
    from dsx.model import certification as model
    from dsx.validation import performance

    spec = _certification(block)
    names = performance.local_stand_ins(spec.target, snap)
    if not names:
        raise BadInputError("--executor local: the snapshot has no GPU node the certification targets")
    timeouts = model.Timeouts(
        min(spec.timeouts.run_timeout_seconds, certify_cmd.LOCAL_RUN_TIMEOUT_SECONDS),
        min(spec.timeouts.stall_timeout_seconds, certify_cmd.LOCAL_STALL_TIMEOUT_SECONDS),
    )
    spec = replace(spec, target=model.Target(node_names=tuple(names)), timeouts=timeouts)
    with LocalExecutor(len(names), names=names) as executor:
        return engine.certify(spec, executor, progress=_progress)


def _certification_runner(executor_kind: str, client: Any, namespace: str | None, image: str | None) -> tuple[Any, str]:
    """The performance phase's runner through dsx certify, or None and why it cannot run.

    kubernetes (default) certifies the cluster being validated, so it needs a live cluster;
    local stands in for the snapshot's GPU nodes with processes on this machine.
    """
    from dsx.validation import performance

    if executor_kind == "local":
        return performance.CertificationRunner(local_certify), ""
    if client is None:
        return None, NO_CLUSTER
    from dsx.kube import jobs

    namespace = namespace or certify_cmd.DEFAULT_NAMESPACE
    launcher = jobs.RunLauncher(client, namespace=namespace)
    return performance.CertificationRunner(kubernetes_certify(client, launcher, namespace=namespace, image=image)), ""


def _copy_beside(source: Path, target: Path) -> Path:
    if source.resolve() != target.resolve():
        try:
            shutil.copyfile(source, target)
        except OSError as exc:
            raise BadInputError(f"{target}: cannot write: {exc.strerror}") from exc
    return target


snapshot_option = click.option(
    "--snapshot",
    "snapshot_files",
    multiple=True,
    metavar="FILE",
    help="Snapshot file (repeat to merge node snapshots); without --kubeconfig no cluster is contacted.",
)


@click.command()
@click.option("--recipe", "recipe_path", required=True, metavar="FILE", help="The recipe to hold the cluster against.")
@snapshot_option
@snapshot_cmd.kubeconfig_option
@snapshot_cmd.context_option
@click.option(
    "--phase",
    "phase_values",
    multiple=True,
    metavar="PHASE",
    help="readiness, deployment, conformance, performance or all (default); repeat or comma-separate.",
)
@click.option(
    "--executor",
    "executor_kind",
    type=click.Choice(EXECUTORS),
    default="kubernetes",
    show_default=True,
    help="Performance phase: certify the cluster's GPU nodes with Jobs (needs a live cluster), or run the "
    "same categories on this machine, one simulated node per snapshot GPU node (at most 8).",
)
@click.option(
    "--namespace",
    default=None,
    metavar="NS",
    help=f"Kubernetes executor: where certification workloads run (default {certify_cmd.DEFAULT_NAMESPACE}).",
)
@click.option(
    "--image",
    default=None,
    metavar="IMAGE",
    help="Kubernetes executor: the image every workload runs in (default: the catalog's per program and fabric).",
)
@click.option(
    "--fail-on-error/--no-fail-on-error",
    default=True,
    show_default=True,
    help="Exit 1 when any check fails; --no-fail-on-error only reports.",
)
@click.option("--output", "-o", "report_path", default=None, metavar="FILE", help="Write the CTRF JSON report.")
@click.option("--junit", "junit_path", default=None, metavar="FILE", help="Write a JUnit XML report.")
@click.option("--attest", is_flag=True, help="Sign a validity attestation beside --output (needs --key, --validator).")
@click.option("--key", "key_path", default=None, metavar="FILE", help="Private signing key for --attest.")
@click.option("--validator", default=None, metavar="NAME", help="Who validated (recorded in the attestation).")
@click.option(
    "--passphrase-env", default="DSX_SIGNING_PASSPHRASE", show_default=True, help="Env var with the key passphrase."
)
def validate(
    recipe_path: str,
    snapshot_files: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    phase_values: tuple[str, ...],
    executor_kind: str,
    namespace: str | None,
    image: str | None,
    fail_on_error: bool,
    report_path: str | None,
    junit_path: str | None,
    attest: bool,
    key_path: str | None,
    validator: str | None,
    passphrase_env: str,
) -> None:
    """Hold a cluster (live, or a snapshot) against a recipe, phase by phase.

    readiness: constraints vs snapshot facts; deployment: components at their pinned versions
    and healthy; conformance: GPU advertising, pool consistency, DaemonSet coverage, taints,
    RBAC; performance: the recipe's certification through the certify engine (--executor).
    """
    import contextlib
    import os

    from dsx import serialization
    from dsx.files import documents
    from dsx.validation import attestation, reports, run

    phases = _phases(phase_values)
    if executor_kind == "local":
        for flag, value in (("--namespace", namespace), ("--image", image)):
            if value is not None:
                raise BadInputError(f"{flag}: applies to --executor kubernetes only")
    if attest:
        missing = [
            flag
            for flag, value in (("--output", report_path), ("--key", key_path), ("--validator", validator))
            if not value
        ]
        if missing:
            raise BadInputError(f"--attest needs {', '.join(missing)}")
        if report_path == "-":
            raise BadInputError("--attest needs --output to name a file (the attestation sits beside it)")
    target = documents.recipe(recipe_path)
    signer = None
    if attest:
        from dsx.files import signing as signing_files

        assert key_path
        passphrase = os.environ.get(passphrase_env)
        signer = signing_files.load_signer(Path(key_path), passphrase.encode() if passphrase else None)
    with contextlib.ExitStack() as stack:
        snap, reader = _snapshot_and_reader(snapshot_files, kubeconfig, context, stack)
        runner, unavailable = _certification_runner(executor_kind, reader, namespace, image)
        report = run.validate(
            target,
            snap,
            phases=phases,
            reader=reader,
            certification=runner,
            certification_unavailable=unavailable,
            generator=snapshot_cmd.GENERATOR,
        )
    if report_path:
        cli_output.write(reports.ctrf_json(report), report_path)
    if junit_path:
        cli_output.write(reports.junit_xml(report), junit_path)
    click.echo(reports.table(report), nl=False)
    if signer is not None:
        from dsx.files import signing as signing_files

        assert report_path and validator
        report_file = Path(report_path)
        stem = report_file.name.removesuffix(".json")
        snapshot_file = report_file.with_name(f"{stem}.snapshot.yaml")
        cli_output.write(serialization.dump_yaml(snap.to_dict()), str(snapshot_file))
        recipe_file = _copy_beside(Path(recipe_path), report_file.with_name(f"{stem}.recipe.yaml"))
        subjects = {"recipe": recipe_file, "snapshot": snapshot_file, "report": report_file}
        claims = attestation.predicate(report, snap, validator=validator, key_id=signer.key_id)
        written = signing_files.attest_beside(report_file, subjects, attestation.PREDICATE_TYPE, claims, signer)
        for path, text in written.items():
            cli_output.write(text, str(path))
        click.echo(
            f"attested {report_file.name} ({', '.join(p.name for p in written)}); check with: "
            f"dsx verify {report_file} --key <public key>",
            err=True,
        )
    if fail_on_error and report.failed:
        raise click.exceptions.Exit(1)


def _drift_table(report: Any) -> str:
    from dsx.validation import drift

    rows = drift.table_rows(report)
    text = cli_output.format_table(["KIND", "SUBJECT", "PATH", "EXPECTED", "ACTUAL"], rows) if rows else ""
    for note in report.notes:
        text += f"note: {note}\n"
    for subject in report.not_compared:
        text += f"not compared: {subject}\n"
    verdict = f"DRIFT: {len(report.changes)} change(s)" if report.drifted else "no drift"
    if not report.complete:
        verdict = f"INCOMPLETE: {len(report.not_compared)} not compared, {verdict}"
    left = report.expected.source or report.expected.name
    right = report.actual.source or report.actual.name
    return text + f"{verdict} ({left} → {right})\n"


@click.command()
@click.argument("files", nargs=-1)
@click.option(
    "--recipe", "recipe_path", default=None, metavar="FILE", help="Baseline recipe (vs --snapshot or the live cluster)."
)
@snapshot_option
@snapshot_cmd.kubeconfig_option
@snapshot_cmd.context_option
@click.option(
    "--fail-on-drift", is_flag=True, help="Exit 1 on any drift, or when something could not be compared (the CI gate)."
)
@cli_output.format_options
def diff(
    files: tuple[str, ...],
    recipe_path: str | None,
    snapshot_files: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    fail_on_drift: bool,
    fmt: str,
    output: str | None,
) -> None:
    """Compare the golden baseline with what runs: missing/extra components, versions, values, labels.

    `dsx diff --recipe R [--snapshot S | --kubeconfig K]` compares a recipe with a cluster;
    `dsx diff A.yaml B.yaml` compares two recipes or two snapshots (A is the baseline).
    """
    import contextlib

    from dsx.files import documents
    from dsx.validation import drift

    if files:
        if recipe_path or snapshot_files or kubeconfig:
            raise BadInputError("diff: give two files, or --recipe with --snapshot/--kubeconfig, not both")
        if len(files) != 2:
            raise BadInputError(f"diff: expected two files (baseline and current), got {len(files)}")
        left, right = (documents.load_mapping_file(f) for f in files)
        report = drift.compare_documents(left, right, left_source=files[0], right_source=files[1])
    elif recipe_path:
        target = documents.recipe(recipe_path)
        with contextlib.ExitStack() as stack:
            snap, _ = _snapshot_and_reader(snapshot_files, kubeconfig, context, stack)
        report = drift.recipe_vs_snapshot(target, snap)
    else:
        raise BadInputError("diff: give --recipe FILE (with --snapshot or --kubeconfig), or two files to compare")
    cli_output.emit(report.to_dict(), fmt, output, table=lambda _: _drift_table(report))
    if fail_on_drift and (report.drifted or not report.complete):
        raise click.exceptions.Exit(1)
