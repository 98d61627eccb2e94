"""`dsx sentinel`: run the operate pipeline, feed it, and look at what it did.

    run       the pipeline with its monitors, probes, metrics and ingestion endpoint
    monitor   one monitor (kernel-log, nvml, kube) feeding a store or a sentinel's /v1/events
    events    stored events             status    nodes, their states and history
    replay    stored events through another policy, touching nothing
    breaker   show or reset the quarantine circuit breaker
    retry     replay dead letters (events a stage gave up on after repeated errors)
    request-validation   ask for nodes to be certified (by name, or from a `dsx diff` report)
    parse     classify the Xid/SXid lines of a kernel log

Stores are URLs: sqlite:///PATH (default: the dsx state directory), postgresql://…, memory:.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsx import settings
from dsx.cli import main as cli_main
from dsx.cli import output as cli_output
from dsx.cli import sentinel_render
from dsx.cli.params import INT64_MAX, FiniteFloatRange, log_format_option
from dsx.cli.sentinel_parse_cmd import parse
from dsx.cli.sentinel_report_cmd import report
from dsx.files import health_files
from dsx.settings import folders

if TYPE_CHECKING:
    from dsx.health.decisions.eventstore import EventStore, StageRecord

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _default_store(server: str) -> str:
    """One SQLite store per cluster in the dsx state folder, named after the apiserver it serves, so
    the histories of two clusters (two `dsx sim` clusters, staging and production) never mix."""
    from urllib.parse import urlsplit

    where = urlsplit(server)
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", where.netloc or server).strip("-") or "cluster"
    sentinel = folders.paths().state_dir / "sentinel"
    folder = sentinel / "clusters" / name
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "events.db"
    shared = sentinel / "events.db"  # one store for every cluster, before 0.1.0's per-cluster default
    if shared.exists() and not store.exists():
        logging.getLogger("dsx.sentinel").warning(
            "the default store is per cluster now; the earlier shared history stays in %s (--store sqlite:///%s)",
            shared,
            shared,
        )
    return f"sqlite:///{store}"


def _targeted_server() -> str:
    """The apiserver of the cluster a command without --store means (kubectl's way of finding it)."""
    import os

    from dsx.errors import BadInputError
    from dsx.kube import incluster
    from dsx.kube.client import server_of

    found = incluster.locate(None, os.environ)
    if found is None:
        raise BadInputError(
            "no --store, and no cluster to find the default store by (the default store is per cluster: "
            "set KUBECONFIG to the cluster's kubeconfig, or give --store URL)"
        )
    return server_of(found)


def _store(url: str | None) -> EventStore:
    """The --store (with --init) of the running command; damaged rows it skipped are reported at the end."""
    from dsx.store import open_store

    context = click.get_current_context()
    store = open_store(url or _default_store(_targeted_server()), init=bool(context.meta.get(_INIT_KEY)))
    context.call_on_close(lambda: _report_damaged(store))
    return store


def _report_damaged(store: EventStore) -> None:
    damaged: dict[str, str] = getattr(store, "damaged", {})
    for name, reason in sorted(damaged.items()):
        click.echo(f"dsx: warning: event store: {name} is damaged and was skipped: {reason}", err=True)


_INIT_KEY = "dsx.sentinel.store_init"


def _since(text: str | None) -> datetime | None:
    """`--since` as an RFC 3339 time or a duration back from now (90s, 30m, 24h, 7d)."""
    from dsx.errors import BadInputError

    if not text:
        return None
    match = _DURATION.match(text.strip())
    if match:
        try:
            return datetime.now(UTC) - timedelta(seconds=float(match[1]) * _UNITS[match[2]])
        except OverflowError:
            raise BadInputError(f"--since: {text!r} reaches back before the year 1; give a shorter duration") from None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadInputError(
            f"--since: {text!r} is neither a time (2026-11-29T10:00:00Z) nor a duration (30m, 24h, 7d)"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def store_option(command: Any) -> Any:
    """--store URL and --init (kept in the context: `_store` reads it)."""
    command = click.option(
        "--init",
        is_flag=True,
        expose_value=False,
        callback=lambda ctx, _param, value: ctx.meta.__setitem__(_INIT_KEY, value),
        help="Create the store even in an existing empty or foreign file (refused without it).",
    )(command)
    return click.option(
        "--store",
        "store_url",
        default=None,
        metavar="URL",
        help="Event store: sqlite:///PATH, postgresql://..., memory:. Default: one SQLite file per cluster"
        " (the apiserver of --sim, --kubeconfig or $KUBECONFIG) in the dsx state folder.",
    )(command)


@click.group("sentinel")
def sentinel() -> None:
    """Monitor node health; quarantine, drain, remediate and re-certify faulty GPU nodes."""


sentinel.add_command(parse)
sentinel.add_command(report)


# -- run -------------------------------------------------------------------------------------------


_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _leader_election_options(command: Any) -> Any:
    """--leader-elect and its timings (client-go's names and defaults), as keyword arguments `leader_*`."""
    seconds = click.FloatRange(min=0.1)
    options = [
        click.option(
            "--leader-elect/--no-leader-elect",
            "leader_elect",
            default=False,
            show_default=True,
            help="Act on nodes only while holding a coordination.k8s.io Lease (run several replicas).",
        ),
        click.option(
            "--leader-elect-namespace",
            "leader_namespace",
            default=None,
            metavar="NS",
            help="Namespace of the Lease (default: $POD_NAMESPACE, else default).",
        ),
        click.option("--leader-elect-lease-name", "leader_lease_name", default="dsx-sentinel", show_default=True),
        click.option(
            "--leader-elect-lease-duration",
            "leader_lease_duration",
            default=settings.LEADER_LEASE_DURATION_SECONDS,
            show_default=True,
            type=seconds,
        ),
        click.option(
            "--leader-elect-renew-deadline",
            "leader_renew_deadline",
            default=settings.LEADER_RENEW_DEADLINE_SECONDS,
            show_default=True,
            type=seconds,
        ),
        click.option(
            "--leader-elect-retry-period",
            "leader_retry_period",
            default=settings.LEADER_RETRY_PERIOD_SECONDS,
            show_default=True,
            type=seconds,
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _token_review(audience: str | None, accounts: tuple[str, ...]) -> Any:
    """The TokenReview settings the options ask for, or None; bad combinations name the flag."""
    from dsx.controllers import sentinel as runtime
    from dsx.errors import BadInputError

    if audience is None:
        if accounts:
            raise BadInputError("--token-review-service-account: applies with --token-review-audience only")
        return None
    if not audience.strip():
        raise BadInputError("--token-review-audience: empty; the audience the monitors' projected tokens carry")
    if not accounts:
        raise BadInputError(
            "--token-review-audience needs --token-review-service-account NS/NAME: the monitors' service account"
        )
    names = []
    for account in accounts:
        namespace, _, name = account.partition("/")
        if not namespace or not name or "/" in name:
            raise BadInputError(f"--token-review-service-account: {account!r} is not NAMESPACE/NAME")
        names.append(f"system:serviceaccount:{namespace}:{name}")
    return runtime.TokenReviewSettings(audience=audience, service_accounts=tuple(names))


def _election(leader_options: dict[str, Any]) -> Any:
    """The ElectionSettings the `leader_*` options ask for, or None without --leader-elect."""
    import os

    from dsx.kube import leader

    if not leader_options["leader_elect"]:
        return None
    return leader.ElectionSettings(
        namespace=leader_options["leader_namespace"] or os.environ.get("POD_NAMESPACE") or "default",
        name=leader_options["leader_lease_name"],
        identity=leader.default_identity(os.environ.get("POD_NAME")),
        lease_duration_seconds=leader_options["leader_lease_duration"],
        renew_deadline_seconds=leader_options["leader_renew_deadline"],
        retry_period_seconds=leader_options["leader_retry_period"],
    )


@sentinel.command("run")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    default=None,
    help="SentinelPolicy file (default: the shipped policy).",
)
@store_option
@click.option(
    "--enable",
    "enable",
    default="",
    metavar="STAGES",
    help="Turn stages on: quarantine,drain,remediation,recertify,validation,maintenance.",
)
@click.option(
    "--sim",
    "sim_name",
    default=None,
    metavar="NAME",
    help="Run against a `dsx sim` cluster (kubeconfig, kernel logs, sim remediation).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Cluster to act on (default: KUBECONFIG, ~/.kube/config, else the pod's service account).",
)
@click.option(
    "--image",
    default=None,
    metavar="IMAGE",
    help="Workload image (dsx[collectives]) that certifies nodes on a real cluster; overrides certification.image.",
)
@click.option("--dry-run", is_flag=True, help="Record what every stage would do; change nothing.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address of the HTTP endpoints.")
@click.option(
    "--port",
    default=settings.SENTINEL_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port of /healthz, /readyz, /metrics, /v1/events (0: any free port).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Bearer tokens for /v1/events and /v1/status (also DSX_SENTINEL_TOKENS).",
)
@click.option(
    "--token-review-audience",
    default=None,
    metavar="AUDIENCE",
    help="Also accept service-account tokens with this audience (TokenReview); each posts for its pod's node only.",
)
@click.option(
    "--token-review-service-account",
    "token_review_accounts",
    multiple=True,
    metavar="NS/NAME",
    help="A service account whose pod-bound tokens are accepted (repeatable; needed with --token-review-audience).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Monitor cursors (default: <dsx state>/sentinel).",
)
@click.option("--owner", default=None, help="Name this sentinel claims work under (stable across restarts).")
@click.option(
    "--log-level",
    type=click.Choice(list(_LOG_LEVELS)),
    default="info",
    show_default=True,
    help="Lowest level of the JSON log lines on stderr.",
)
@click.option(
    "--workers",
    default=settings.SENTINEL_WORKERS,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Nodes handled in parallel per stage.",
)
@_leader_election_options
@log_format_option
def run(
    config: str | None,
    store_url: str | None,
    enable: str,
    sim_name: str | None,
    kubeconfig: str | None,
    image: str | None,
    dry_run: bool,
    host: str,
    port: int,
    token_file: str | None,
    token_review_audience: str | None,
    token_review_accounts: tuple[str, ...],
    state_dir: str | None,
    owner: str | None,
    log_level: str,
    workers: int,
    log_format: str,
    **leader_options: Any,
) -> None:
    """Run the pipeline until SIGTERM or Ctrl-C (logs on stderr, JSON lines by default).

    With --leader-elect, replicas sharing one store elect a leader through a Lease; only the
    leader acts on nodes, and one that loses the Lease exits with status 1 (to be restarted).
    """
    import dataclasses
    import os
    import sys

    from dsx import interrupts, logs
    from dsx.api import security
    from dsx.controllers import sentinel as runtime
    from dsx.controllers import sentinel_wiring
    from dsx.errors import BadInputError
    from dsx.health.decisions import policy as policy_module

    if sim_name and kubeconfig:
        raise BadInputError("sentinel run: give --sim NAME or --kubeconfig FILE, not both")
    logs.configure(log_format, _LOG_LEVELS[log_level])
    chosen = health_files.sentinel_policy(config).with_overrides(
        enable=policy_module.parse_stages(enable), dry_run=dry_run
    )
    if image:
        chosen = dataclasses.replace(chosen, certification=dataclasses.replace(chosen.certification, image=image))
    folder = (
        Path(state_dir)
        if state_dir
        else folders.paths().state_dir / "sentinel" / (f"sim-{sim_name}" if sim_name else "default")
    )
    election = _election(leader_options)
    choice = sentinel_wiring.ClusterChoice(kubeconfig=Path(kubeconfig) if kubeconfig else None, sim_name=sim_name)
    options = runtime.SentinelOptions(
        policy=chosen,
        store_url=store_url or _default_store(sentinel_wiring.cluster_server(choice)),
        state_dir=folder,
        host=host,
        port=port,
        token_digests=security.load_tokens(token_file, env_var="DSX_SENTINEL_TOKENS"),
        token_review=_token_review(token_review_audience, token_review_accounts),
        # replicas share one owner name, so a new leader re-claims the old one's work at once
        owner=owner or (f"dsx-sentinel/{election.name}" if election else runtime.default_owner()),
        workers=workers,
        election=election,
        store_init=bool(click.get_current_context().meta.get(_INIT_KEY)),
    )
    sentinel_runtime = sentinel_wiring.build(options, choice)
    sys.setswitchinterval(runtime.SWITCH_INTERVAL_SECONDS)
    sentinel_runtime.start()
    assert sentinel_runtime.http is not None
    # a record like every other line of the sentinel's log, so the whole log stays JSON
    logging.getLogger("dsx.sentinel").info(
        "serving", extra={"url": f"http://{host}:{sentinel_runtime.http.port}", "port": sentinel_runtime.http.port}
    )
    interrupts.wait_for_stop(sentinel_runtime.finished)
    if sentinel_runtime.refusal is not None:  # another sentinel acts on the store (dsx.health.decisions.actor)
        try:
            cli_main.report(sentinel_runtime.refusal)  # the one-line error every command prints
        except SystemExit:
            os._exit(sentinel_runtime.refusal.exit_code)  # not sys.exit: the Lease loop is still running
    if sentinel_runtime.leadership_lost.is_set():
        os._exit(1)  # another replica may act now: stop this one's work mid-step rather than overlap
    sentinel_runtime.stop()
    # handlers cut short (a remediation waiting on a node) resume at the next start: do not wait for them
    os._exit(0)


# -- monitor ---------------------------------------------------------------------------------------


@sentinel.command("monitor")
@click.argument("kind", type=click.Choice(["kernel-log", "nvml", "kube"]))
@click.option("--node", "node_name", default=None, help="The node this monitor runs on (kernel-log, nvml).")
@click.option("--path", "log_path", type=click.Path(dir_okay=False), default=None, help="kernel-log: follow this file.")
@click.option("--journal", is_flag=True, help="kernel-log: read journald (journalctl -k).")
@click.option(
    "--state", "state_file", type=click.Path(dir_okay=False), default=None, help="kernel-log: where the cursor is kept."
)
@click.option(
    "--driver-version",
    default=None,
    help="kernel-log: the node's NVIDIA driver (575.57.08), for NVLink5 Xid decoding when the log has no NVRM banner.",
)
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="kube: the cluster to watch (default as `run`)."
)
@store_option
@click.option("--url", default=None, help="Post to a sentinel's /v1/events instead of writing a store.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None, help="Bearer token for --url.")
@click.option(
    "--interval",
    "interval_seconds",
    default=1.0,
    show_default=True,
    type=FiniteFloatRange(0, 86400),
    help="Seconds between polls.",
)
@click.option("--once", is_flag=True, help="Poll once and exit.")
@log_format_option
def monitor(
    kind: str,
    node_name: str | None,
    log_path: str | None,
    journal: bool,
    state_file: str | None,
    driver_version: str | None,
    kubeconfig: str | None,
    store_url: str | None,
    url: str | None,
    token_file: str | None,
    interval_seconds: float,
    once: bool,
    log_format: str,
) -> None:
    """Run one monitor, sending what it sees to a store or a sentinel (logs on stderr)."""
    from dsx import logs
    from dsx.controllers import monitors

    logs.configure(log_format)

    sink = monitors.HttpSink(url, monitors.TokenFile(token_file)) if url else monitors.StoreSink(_store(store_url))
    if kind == "kube":
        count = monitors.run_kube_monitor(kubeconfig, sink, once=once)
    else:
        source = monitors.node_source(
            kind,
            node_name=node_name,
            log_path=log_path,
            journal=journal,
            state_file=state_file,
            driver_version=driver_version,
        )
        count = monitors.run_source(source, sink, interval_seconds=interval_seconds, once=once)
    logging.getLogger("dsx.sentinel.monitor").info(
        "%s: %d new event(s) sent", kind, count, extra={"monitor": kind, "events_sent": count}
    )


# -- reading ---------------------------------------------------------------------------------------


@sentinel.command("events")
@store_option
@click.option("--node", "node_name", default=None, help="Only this node's events.")
@click.option(
    "--since", default=None, help="Only events generated since TIME (RFC 3339) or a duration ago (30m, 24h, 7d)."
)
@click.option(
    "--after", "after_sequence", default=0, type=click.IntRange(0, INT64_MAX), help="Only events past this sequence."
)
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(1, 100000))
@cli_output.format_options
def events(
    store_url: str | None,
    node_name: str | None,
    since: str | None,
    after_sequence: int,
    limit: int,
    fmt: str,
    output: str | None,
) -> None:
    """Stored events, oldest first, with what each stage did with them."""
    store = _store(store_url)
    try:
        found = store.events(after_sequence=after_sequence, limit=limit, node_name=node_name, since=_since(since))
        rows = [
            {
                "sequence": s.sequence,
                "storedAt": s.stored_at.isoformat(),
                **s.event.to_dict(),
                "stages": {r.stage: _stage_detail(r) for r in store.stage_records(s.sequence)},
            }
            for s in found
        ]
    finally:
        store.close()
    cli_output.emit(rows, fmt, output, table=sentinel_render.events_table)


def _stage_detail(record: StageRecord) -> dict[str, Any]:
    """A stage's record as shown: camelCase keys (`withEvent`, `ruleSets`); the stored detail stays as written."""
    from dsx.model import schema

    return {"status": record.status.value, **schema.camel_keys(dict(record.detail), data_keys=STAGE_DATA_KEYS)}


STAGE_DATA_KEYS = frozenset({"labels"})
REPLAY_DATA_KEYS = frozenset({"labels", "final_states", "dispositions"})
"""Mappings in a replay report keyed by data (node names, stage and disposition names), kept as they are."""
"""Keys of a stage detail whose mapping is data (label keys), shown as stored."""


@sentinel.command("status")
@store_option
@click.option(
    "--format", "fmt", type=click.Choice(cli_output.FORMATS), default="table", show_default=True, help="Output format."
)
@click.option(
    "-o", "--output", "output", type=click.Path(dir_okay=False), default=None, help="Write to FILE instead of stdout."
)
def status(store_url: str | None, fmt: str, output: str | None) -> None:
    """Each node that left service: its state, why, and its history; breaker, validation requests, dead letters."""
    from dsx.health.decisions import breaker, pipeline_status
    from dsx.health.decisions import policy as policy_module

    store = _store(store_url)
    try:
        gate = breaker.CircuitBreaker(store, policy_module.BreakerSettings(), lambda: 0)
        document = pipeline_status.document(store, gate, now=datetime.now(UTC))
    finally:
        store.close()
    cli_output.emit(document, fmt, output, table=sentinel_render.status_table)


@sentinel.command("retry")
@store_option
@click.option(
    "--stage", default=None, help="Only dead letters of this stage (quarantine, drain, remediation, recertify)."
)
@click.option("--event", "sequence", default=None, type=click.IntRange(1), help="Only the dead letter of this event.")
def retry(store_url: str | None, stage: str | None, sequence: int | None) -> None:
    """Offer dead letters to their stage again, and to the later stages that went past them.

    A running sentinel picks them up within a lease renewal (20 s by default).
    """
    from dsx.health.decisions import dead_letters
    from dsx.health.decisions.policy import PIPELINE

    store = _store(store_url)
    try:
        reopened = dead_letters.retry(store, [s.value for s in PIPELINE], stage=stage, sequence=sequence)
    finally:
        store.close()
    for name, number in reopened:
        click.echo(f"event {number}: offered to stage {name} again")
    if not reopened:
        click.echo("no dead letters")


# -- replay ----------------------------------------------------------------------------------------


@sentinel.command("replay")
@click.option(
    "--policy",
    "policy_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The SentinelPolicy to replay against.",
)
@store_option
@click.option("--since", default=None, help="Only events generated since TIME or a duration ago (30m, 24h, 7d).")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Read the fleet (nodes, pods) from this cluster; nothing is written.",
)
@click.option("--sim", "sim_name", default=None, metavar="NAME", help="Read the fleet from a `dsx sim` cluster.")
@cli_output.format_options
def replay(
    policy_file: str,
    store_url: str | None,
    since: str | None,
    kubeconfig: str | None,
    sim_name: str | None,
    fmt: str,
    output: str | None,
) -> None:
    """What POLICY would have quarantined, drained and remediated for the stored events."""
    from dsx.testing import replay as replaying

    chosen = health_files.sentinel_policy(policy_file)
    store = _store(store_url)
    try:
        moment = _since(since)
        history = []
        after = 0
        while True:
            page = store.events(after_sequence=after, limit=5000, since=moment)
            history.extend(page)
            if len(page) < 5000:
                break
            after = page[-1].sequence
    finally:
        store.close()
    fleet, pods = _read_fleet(kubeconfig, sim_name)
    report = replaying.replay(history, chosen, node_objects=fleet, pods=pods)
    from dsx.model import schema

    shown = schema.camel_keys(report.to_dict(), data_keys=REPLAY_DATA_KEYS)
    cli_output.emit(shown, fmt, output, table=sentinel_render.replay_table)


def _read_fleet(
    kubeconfig: str | None, sim_name: str | None
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
    if not kubeconfig and not sim_name:
        return None, []
    from dsx.controllers import sentinel_wiring

    choice = sentinel_wiring.ClusterChoice(Path(kubeconfig) if kubeconfig else None, sim_name)
    with sentinel_wiring.cluster_client(choice) as client:
        return client.list_nodes(), client.list_pods()


# -- breaker ---------------------------------------------------------------------------------------


@sentinel.group("breaker")
def breaker_group() -> None:
    """The quarantine circuit breaker."""


@breaker_group.command("status")
@store_option
@cli_output.format_options
def breaker_status(store_url: str | None, fmt: str, output: str | None) -> None:
    """State, window and why it tripped."""
    from dsx.health.decisions import breaker
    from dsx.health.decisions import policy as policy_module

    store = _store(store_url)
    try:
        document = breaker.CircuitBreaker(store, policy_module.BreakerSettings(), lambda: 0).status()
    finally:
        store.close()
    cli_output.emit(document, fmt, output)


@breaker_group.command("reset")
@store_option
def breaker_reset(store_url: str | None) -> None:
    """Close a tripped breaker; events refused while it was open are not replayed."""
    from dsx.health.decisions import breaker
    from dsx.health.decisions import policy as policy_module

    store = _store(store_url)
    try:
        gate = breaker.CircuitBreaker(store, policy_module.BreakerSettings(), lambda: 0)
        before = gate.state()
        document = gate.reset()
    finally:
        store.close()
    click.echo(f"breaker {gate.name}: {before.value} → {document['state']} (resets: {document['resets']})")


# -- validation requests ---------------------------------------------------------------------------


@sentinel.command("request-validation")
@store_option
@click.option("--node", "node_names", multiple=True, help="A node to certify (repeatable).")
@click.option(
    "--drift",
    "drift_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A `dsx diff --format json` report: its affected nodes.",
)
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Read the GPU nodes a fleet-wide drift affects."
)
@click.option("--sim", "sim_name", default=None, metavar="NAME", help="Read the GPU nodes from a `dsx sim` cluster.")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    default=None,
    help="SentinelPolicy (for its GPU node selector).",
)
@click.option("--dry-run", is_flag=True, help="Show the requests; store nothing.")
def request_validation(
    store_url: str | None,
    node_names: tuple[str, ...],
    drift_file: str | None,
    kubeconfig: str | None,
    sim_name: str | None,
    config: str | None,
    dry_run: bool,
) -> None:
    """Queue validation requests; a running sentinel certifies at most M nodes at once."""
    from dsx.errors import BadInputError
    from dsx.files import documents
    from dsx.health.decisions import nodes as node_facts
    from dsx.health.decisions import validation_requests as requests

    if bool(node_names) == bool(drift_file):
        raise BadInputError("request-validation: give --node NAME (repeatable) or --drift REPORT, not both")
    wanted: dict[str, str] = {}
    if node_names:
        wanted = {name: requests.reason(requests.ValidationKind.MANUAL, "requested by a person") for name in node_names}
    else:
        report = documents.load_mapping_file(str(drift_file))
        if report.get("kind") != "DriftReport":
            raise BadInputError(f"{drift_file}: kind: expected DriftReport (from `dsx diff --format json`)")
        fleet, _ = _read_fleet(kubeconfig, sim_name)
        selector = health_files.sentinel_policy(config).gpu_node_selector
        gpu_nodes = [node_facts.name(n) for n in fleet or [] if node_facts.selected(n, selector)]
        found = requests.nodes_from_drift(report, gpu_nodes, source=str(drift_file))
        wanted = {node: requests.reason(requests.ValidationKind.DRIFT, why) for node, why in found.items()}
    if dry_run:
        for node, why in sorted(wanted.items()):
            click.echo(f"would request: {node}  ({why})")
        return
    store = _store(store_url)
    try:
        for node, why in sorted(wanted.items()):
            request = store.request_validation(node, why)
            click.echo(f"request {request.request_id}: {node} {request.status.value} ({request.reason})")
    finally:
        store.close()
    if not wanted:
        click.echo("no node is affected", err=True)
