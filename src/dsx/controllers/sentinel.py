"""The sentinel runtime: monitors, analyzer and pipeline stages over one store and one cluster.

Composition only — what each part decides lives in `dsx.health`, and what stands behind each
port (the cluster, the remediation provider, the recertifier, the kernel logs; real or
simulated) is chosen by the composition root, `dsx.controllers.sentinel_wiring`, and handed
in as `SentinelParts`. One process runs:

- **monitors** in-process: kernel logs (files or journald, persisted cursors under the state
  directory), the Kubernetes-object policies over a node watch, and the ingestion endpoint for
  external monitors (`POST /v1/events`);
- the **analyzer** and the four **stages** (quarantine → drain → remediation → recertify), each
  a consumer with its own durable cursor and its own store connection, woken as soon as
  something they wait for happens (an append in this process, an acknowledgement upstream, a
  NOTIFY from PostgreSQL, or a poll for other writers);
- the **validation runner** (at most M certifications at once) and the joining-node watch;
- **maintenance requests** (`dsx.health.decisions.maintenance`): cordon and drain before a request's start,
  hand the node back when it is deleted;
- **fleet accounting** every few seconds: stage lag, breaker state, nodes per state, GPU-hours
  per state and the goodput ratio;
- the HTTP server (`dsx.controllers.http`).

With leader election (`SentinelOptions.election`, `dsx.kube.leader`) several replicas share one
store: every replica serves the HTTP endpoints (probes, metrics, status and ingestion, which
only append to the shared store), and only the holder of the Lease runs what acts or decides
(monitors, analyzer, stages, validations, node watch, fleet accounting). A leader that loses
the Lease sets `leadership_lost` and `finished`; the CLI then exits at once, unfinished work is
re-offered by the store to the next leader (same owner name).

Every loop survives any exception (`dsx.controllers.loops`: logged with its traceback once,
counted, shown by /readyz until a round succeeds), so one unreachable apiserver call, a locked
database or a bug hit by one event never stops the others; what did not finish is re-offered
by the store, and an event a stage keeps failing on is parked as a dead letter. `stop()` ends
the loops; work cut short is resumed by the next start (same owner name).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsx import errors, retry, settings
from dsx.api import security
from dsx.controllers import http, kube_maintenance, kube_nodes, loops, monitors, telemetry
from dsx.files import health_files
from dsx.health.decisions import actor as actor_claim
from dsx.health.decisions import (
    analyzer,
    breaker,
    drain,
    goodput,
    maintenance,
    pipeline_status,
    quarantine,
    recertify,
    remediation,
    validation_requests,
)
from dsx.health.decisions.eventstore import EventStore
from dsx.health.decisions.policy import PIPELINE, KernelLogSource, SentinelPolicy, Stage
from dsx.health.decisions.ports import Recertifier, RemediationProvider
from dsx.health.decisions.stage import StageHandler
from dsx.health.parsing import kube_objects, node_events, xid
from dsx.host.kernel_log import FileFollower, JournalReader, KernelLogMonitor, LineReader
from dsx.kube import leader
from dsx.kube.client import KubeClient
from dsx.kube.watch import ResourceWatch
from dsx.model.health import HealthEvent, NodeState
from dsx.pipeline import analyzer_stage, stages, validations
from dsx.pipeline import source as monitor_source
from dsx.settings import folders
from dsx.store import open_store
from dsx.store.group_commit import GroupCommit

log = logging.getLogger("dsx.sentinel")

DEFAULT_PORT = settings.SENTINEL_PORT
CLAIM_RETRY_SECONDS = 30.0
"""How long a start retries a store write conflict while claiming the store (dsx.health.decisions.actor)."""


def _process_gone(holder: actor_claim.Actor) -> bool:
    """Whether the claim's holder is a process of this host that runs no more (a crash here)."""
    if holder.host != socket.gethostname() or holder.pid <= 0:
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # runs, as another user
    return False


def default_owner() -> str:
    """Stable across restarts on one host, so a restarted sentinel re-claims its own work at once."""
    return f"dsx-sentinel@{socket.gethostname()}"


READINESS_INTERVAL_SECONDS = 2.0
"""How often the readiness loop asks the store and the API."""
READINESS_STALE_SECONDS = 10.0
"""A readiness check that has not come back for this long makes /readyz say so (503)."""


BULK_YIELD_SECONDS = 1.0
"""How long a bulk post may wait for expedited events (`SentinelRuntime._yield_to_urgent`)."""
SWITCH_INTERVAL_SECONDS = 0.001
"""The interpreter's thread switch interval for `dsx sentinel run` (CPython's default is 5 ms).

Why: under a flood one request thread parses a 1,000-event post (CPU), and every thread that did
I/O (a store statement, the cordon PATCH) waits up to the switch interval to take the interpreter
back. A cordon is a hundred such returns: at 5 ms a fault waited most of a second behind the flood.
"""


@dataclass(frozen=True)
class TokenReviewSettings:
    """Accept pod-bound service-account tokens (dsx.api.security.NodeBoundAuthenticator)."""

    audience: str
    service_accounts: tuple[str, ...]
    """`system:serviceaccount:NS:NAME` of the monitors."""


@dataclass(frozen=True)
class SentinelOptions:
    policy: SentinelPolicy
    store_url: str
    state_dir: Path = field(default_factory=lambda: folders.paths().state_dir / "sentinel")
    """Monitor cursors and other local state."""
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token_digests: frozenset[str] = frozenset()
    token_review: TokenReviewSettings | None = None
    """Also accept monitors' pod-bound tokens, each for its own node only; None: shared tokens only."""
    owner: str = field(default_factory=default_owner)
    workers: int = settings.SENTINEL_WORKERS
    """Worker threads per stage: nodes handled in parallel."""
    fleet_interval_seconds: float = 5.0
    store_poll_seconds: float = 1.0
    stage_step_seconds: float = 0.005
    """Shortest time between two steps of a stage that is on (what a fault may wait for a batch)."""
    follow_step_seconds: float = 0.05
    """Same, for a stage that is off: it only moves its cursor after the stage before it."""
    election: leader.ElectionSettings | None = None
    """Act only while holding this Lease; None: act at once (a single replica)."""
    store_init: bool = False
    """Create the store in an existing empty or foreign file (`--init`) instead of refusing it."""


@dataclass(frozen=True)
class SentinelParts:
    """What stands behind the runtime's ports, chosen once by `dsx.controllers.sentinel_wiring`."""

    client: KubeClient
    """The cluster; closed by `SentinelRuntime.stop()`."""
    provider: RemediationProvider
    recertifier: Recertifier | None
    """Runs re-certification and validation requests; None only when neither may act."""
    kernel_logs: tuple[KernelLogSource, ...] = ()
    """Every kernel log followed in-process: the policy's, plus those the cluster brings."""


class SentinelRuntime:
    """Build with options and parts, `start()`, then `stop()`; see the module docstring."""

    def __init__(self, options: SentinelOptions, parts: SentinelParts) -> None:
        acting = [s.value for s in (Stage.RECERTIFY, Stage.VALIDATION) if options.policy.switch(s).acting]
        if acting and parts.recertifier is None:
            raise errors.BadInputError(f"sentinel: {' and '.join(acting)} act but no recertifier was configured")
        self.options = options
        self.parts = parts
        self.policy = options.policy
        self.telemetry = telemetry.SentinelTelemetry()
        self.loops = loops.LoopHealth(self.telemetry)
        self.waker = stages.Waker()
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []
        self._stores: list[EventStore] = []
        self._fleet_size = 0
        self._hours = goodput.GpuHours()
        self._started = False
        self._dependencies: tuple[str | None, float] | None = None
        """The last check of the store and the API: (None or what failed, when it ended, monotonic)."""
        self.http: http.SentinelHttpServer | None = None
        self.runners: list[stages.StageRunner] = []
        self.quarantine_runner: stages.StageRunner | None = None
        self.quarantine: quarantine.QuarantineHandler | None = None
        self.validations: validations.ValidationRunner | None = None
        self.joining: validation_requests.JoiningNodes | None = None
        self.maintenance: maintenance.MaintenanceController | None = None
        self.kernel_monitors: list[KernelLogMonitor] = []
        self.kube_monitor: kube_objects.KubeObjectMonitor | None = None
        self.event_monitor: node_events.NodeEventMonitor | None = None
        self._node_view: ResourceWatch | None = None
        self.elector: leader.LeaderElector | None = None
        self._leases_client: KubeClient | None = None
        self.leadership_lost = threading.Event()
        self.refusal: errors.ConflictError | None = None
        """Why this sentinel may not act: another acts on its store (dsx.health.decisions.actor)."""
        host = socket.gethostname()
        election = options.election
        self.actor = actor_claim.Actor(
            f"{host}-{os.getpid()}", host, os.getpid(), f"{election.namespace}/{election.name}" if election else ""
        )
        self._actor_store: EventStore | None = None
        self.finished = threading.Event()
        """Set when the process should end: the Lease was lost (or the CLI got a signal)."""
        self.store = self._open_store()
        self.ingestion = GroupCommit(self._open_store())
        """`POST /v1/events` appends: concurrent requests share one transaction (its own connection)."""
        self.client = parts.client
        self.nodes = kube_nodes.KubeNodeOps(self.client)

    # -- construction ---------------------------------------------------------------------------

    def _open_store(self) -> EventStore:
        """A store connection of its own for one part (all parts share one in-memory store)."""
        if self._stores and self.options.store_url == "memory:":
            return self._stores[0]
        # the first connection creates the store; later ones find it
        opened = open_store(self.options.store_url, init=self.options.store_init and not self._stores)
        self._stores.append(opened)
        return opened

    def _build(self) -> None:
        policy, options = self.policy, self.options
        self._fleet_size = len(self.client.list_node_metadata(dict(policy.gpu_node_selector)))
        quarantine_store = self._open_store()
        acting = policy.switch(Stage.QUARANTINE).acting
        gate = breaker.CircuitBreaker(
            quarantine_store,
            policy.breaker,
            lambda: self._fleet_size,
            name=breaker.NAME if acting else f"{breaker.NAME}-dry-run",
        )
        self.breaker = gate
        rules = [p.source for r in policy.quarantine.rule_sets for p in (*r.match_all, *r.match_any)]
        self.quarantine = quarantine.QuarantineHandler(
            quarantine_store,
            self.nodes,
            policy,
            gate,
            self.telemetry,
            node_view=self.viewed_node if kube_nodes.slim_view_serves(rules) else None,
        )
        drain_store, remediation_store, recertify_store = self._open_store(), self._open_store(), self._open_store()
        handlers: list[StageHandler] = [
            self.quarantine,
            drain.DrainHandler(drain_store, self.nodes, policy, self.telemetry),
            remediation.RemediationHandler(remediation_store, self.nodes, policy, self.parts.provider, self.telemetry),
            recertify.RecertifyHandler(recertify_store, self.nodes, policy, self.telemetry),
        ]
        stores = [quarantine_store, drain_store, remediation_store, recertify_store]
        self.runners = [
            stages.StageRunner(
                s,
                h,
                owner=options.owner,
                workers=options.workers,
                waker=self.waker,
                dead_letter=policy.dead_letter,
                enabled=policy.switch(stage).enabled,
            )
            for s, h, stage in zip(stores, handlers, PIPELINE, strict=True)
        ]
        self.quarantine_runner = next(r for r in self.runners if r.name == Stage.QUARANTINE.value)
        if self.parts.recertifier is not None:
            self.validations = validations.ValidationRunner(
                self._open_store(), self.nodes, policy, self.parts.recertifier, self.telemetry
            )
        if policy.switch(Stage.VALIDATION).enabled:
            self.joining = validation_requests.JoiningNodes(self.store, self.nodes, policy, self.telemetry)
        if policy.switch(Stage.MAINTENANCE).enabled:
            self.maintenance = maintenance.MaintenanceController(
                kube_maintenance.KubeMaintenanceRequests(self.client), self.nodes, policy, self.telemetry
            )
        if policy.monitors.kube_objects:
            self.kube_monitor = kube_objects.KubeObjectMonitor(kube_objects.shipped_policies())
        if policy.monitors.node_events:
            self.event_monitor = node_events.NodeEventMonitor(
                node_events.shipped_policies(), since_epoch_seconds=time.time()
            )
        sources = self.parts.kernel_logs
        labels = self._node_labels() if any(not source.driver_version for source in sources) else {}
        for source in sources:
            self.kernel_monitors.append(self._kernel_monitor(source, labels.get(source.node, {})))

    def _kernel_monitor(self, source: KernelLogSource, labels: dict[str, str]) -> KernelLogMonitor:
        reader: LineReader
        if source.journal:
            reader = JournalReader(from_end=self.policy.monitors.start_at_end)
        else:
            reader = FileFollower(source.path, from_end=self.policy.monitors.start_at_end)
        state = self.options.state_dir / "monitors" / f"kernel-log-{source.node}.json"
        # the configured driver version, else the node's GPU Feature Discovery labels; the log's banner beats both
        driver = xid.resolve_driver_version(source.driver_version or None, labels)
        monitor = KernelLogMonitor(source.node, reader, state, driver=driver)
        monitors.restore_burst_windows(monitor, self.store)  # a restart keeps the duplicate windows
        return monitor

    def _node_labels(self) -> dict[str, dict[str, str]]:
        """Every node's labels, read once (one list call, not one per monitored node)."""
        try:
            found = self.client.list_node_metadata()
        except errors.DsxError:
            return {}  # not readable now: the banner, or both NVLink5 layouts, will do
        return {
            str(node["metadata"]["name"]): dict(node["metadata"].get("labels") or {})
            for node in found
            if node.get("metadata", {}).get("name")
        }

    # -- running --------------------------------------------------------------------------------

    def start(self) -> None:
        self.options.state_dir.mkdir(parents=True, exist_ok=True)
        self._build()
        self._refresh_readiness()
        self._spawn(
            "readiness",
            self._poll_loop(self._refresh_readiness, READINESS_INTERVAL_SECONDS, always_wait=True, name="readiness"),
        )
        self.http = http.SentinelHttpServer(
            http.Routes(
                ready=self.ready,
                metrics=self.telemetry.exposition,
                status=self.status,
                ingest=self.ingest,
                authenticator=self._authenticator(),
                before_bulk=self._yield_to_urgent,
            ),
            host=self.options.host,
            port=self.options.port,
        )
        self.http.start()
        if self.options.election is None:
            try:
                self._act()
            except errors.ConflictError:
                self.stop()
                raise
        else:
            self._campaign(self.options.election)
        self._started = True
        log.info(
            "sentinel started",
            extra={
                "port": self.http.port,
                "stages": {s.value: vars(self.policy.switch(s)) for s in (Stage.ANALYZER, *PIPELINE, Stage.VALIDATION)},
                "kernel_logs": len(self.kernel_monitors),
                "owner": self.options.owner,
                "leader_election": vars(self.options.election) if self.options.election else None,
            },
        )

    def _authenticator(self) -> security.Authenticator:
        shared = security.TokenAuthenticator(self.options.token_digests)
        review = self.options.token_review
        if review is None:
            return shared
        return security.NodeBoundAuthenticator(
            shared, self.client, audience=review.audience, service_accounts=review.service_accounts
        )

    def _campaign(self, election: leader.ElectionSettings) -> None:
        """Stand by until this replica holds the Lease, then act; a lost Lease ends the process."""
        leases = KubeClient(self.client.kubeconfig, request_timeout_seconds=election.request_timeout_seconds)
        self._leases_client = leases
        self.elector = leader.LeaderElector(
            leases, election, on_started_leading=self._act, on_stopped_leading=self._lost_leadership
        )
        self.telemetry.leader.set(0)
        elector = self.elector
        self._spawn("leader-election", lambda: elector.run(self.stop_event))

    def _lost_leadership(self) -> None:
        self.telemetry.leader.set(0)
        self.leadership_lost.set()
        self.stop_event.set()
        self.finished.set()

    def _acts(self) -> bool:
        return any(self.policy.switch(stage).enabled for stage in (*PIPELINE, Stage.VALIDATION))

    def _claim(self) -> None:
        """Register as the store's one actor, or ConflictError naming the one that acts on it.

        The refusal comes back as the transaction's result; a ConflictError the store raises (a
        deadlock beside a crashed predecessor's lingering transaction) is a write to retry."""
        store = self._actor_store = self._actor_store or self._open_store()
        me = self.actor

        def decide(current: dict[str, Any] | None) -> tuple[dict[str, Any] | None, errors.ConflictError | None]:
            try:
                return actor_claim.decide(current, me, datetime.now(UTC), gone=_process_gone), None
            except errors.ConflictError as refused:
                return None, refused

        for attempt in retry.attempts(timeout_seconds=CLAIM_RETRY_SECONDS, backoff=retry.Backoff(0.1)):
            try:
                refused = store.update_breaker(actor_claim.DOCUMENT, decide)
                break
            except errors.ConflictError as exc:
                log.warning("claiming the store: attempt %d: %s", attempt, exc)
        else:
            raise errors.UnavailableError(f"event store: could not claim it in {CLAIM_RETRY_SECONDS:g} s")
        if refused is not None:
            raise refused
        log.info("acting on the store", extra={"actor": me.instance, "lease": me.lease or None})

    def _renew_claim(self) -> None:
        assert self._actor_store is not None
        me = self.actor
        renewed = self._actor_store.update_breaker(
            actor_claim.DOCUMENT,
            lambda current: ((doc := actor_claim.renewal(current, me, datetime.now(UTC))), doc is not None),
        )
        if not renewed:
            self._refuse(
                errors.ConflictError(
                    "event store: another sentinel took over the store while this one was not renewing its claim;"
                    " stopping so the two do not overlap"
                )
            )

    def _refuse(self, refusal: errors.ConflictError) -> None:
        log.error("not acting: %s", refusal, extra={"actor": self.actor.instance})
        self.refusal = refusal
        self._lost_leadership()

    def _release_claim(self) -> None:
        if self._actor_store is None or self.refusal is not None:
            return
        me = self.actor
        try:
            self._actor_store.update_breaker(
                actor_claim.DOCUMENT, lambda current: (actor_claim.released(current, me), None)
            )
        except errors.DsxError as exc:  # it goes stale within STALE_SECONDS anyway
            log.warning("could not release the actor claim: %s", exc)

    def _act(self) -> None:
        """Start everything that decides or acts (at once, or when elected)."""
        if self._acts():
            try:
                self._claim()
            except errors.ConflictError as refusal:  # another acts on the store (store conflicts were retried)
                if self.options.election is None:
                    raise  # start() fails: the CLI says why and exits
                self._refuse(refusal)  # elected, yet another acts without the Lease: step down and exit
                return
            self._spawn(
                "actor-claim",
                self._poll_loop(self._renew_claim, actor_claim.RENEW_SECONDS, always_wait=True, name="actor-claim"),
            )
        self.telemetry.leader.set(1)
        for runner in self.runners:
            self._spawn(f"stage-{runner.name}", self._stage_loop(runner))
        if self.policy.switch(Stage.ANALYZER).enabled:
            rules = health_files.analyzer_rules(self.policy.analyzer_rules)
            correlate = analyzer_stage.AnalyzerStage(
                self._open_store(), analyzer.Analyzer(rules), owner=self.options.owner
            )
            correlate.warm()
            self._spawn("analyzer", self._poll_loop(correlate.step, 0.2, name="analyzer"))
        if self.validations is not None or self.joining is not None:
            self._spawn("validations", self._poll_loop(self._validate, 1.0, name="validations"))
        if self.maintenance is not None:
            every = min(self.policy.maintenance.poll_seconds, self.policy.drain.poll_seconds)
            self._spawn(
                "maintenance", self._poll_loop(self.maintenance.step, every, always_wait=True, name="maintenance")
            )
        if self.kernel_monitors:
            self._spawn(
                "kernel-log",
                self._poll_loop(self._pump_kernel_logs, self.policy.monitors.poll_interval_seconds, name="kernel-log"),
            )
        if self.kube_monitor is not None or self.joining is not None or self.policy.switch(Stage.QUARANTINE).acting:
            self._spawn("node-watch", self._watch_nodes)  # node policies, joining nodes, manual uncordons
        if self.event_monitor is not None:
            self._spawn("node-events", self._watch_node_events)  # node-problem-detector's Events
        self._spawn(
            "fleet",
            self._poll_loop(self._account_fleet, self.options.fleet_interval_seconds, always_wait=True, name="fleet"),
        )
        accounting = self._open_store()
        self._spawn(
            "consumers",  # the store alone: lag stays visible while the apiserver hangs
            self._poll_loop(
                lambda: self._account_consumers(accounting),
                self.options.fleet_interval_seconds,
                always_wait=True,
                name="consumers",
            ),
        )
        self._spawn("store-watch", self._watch_store)

    def stop(self, *, timeout_seconds: float = 10.0) -> None:
        self.stop_event.set()
        self.waker.poke()
        deadline = time.monotonic() + timeout_seconds
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for runner in self.runners:
            runner.close(wait=False)
        if self.validations is not None:
            self.validations.close()
        if self.http is not None:
            self.http.stop()
        for monitor in self.kernel_monitors:
            monitor.close()
        self.client.close()
        self._release_claim()  # after the loops ended, like the Lease: another may act at once
        if self.elector is not None and not self.leadership_lost.is_set():
            self.elector.release()  # after the loops ended: a standby may act at once
        if self._leases_client is not None:
            self._leases_client.close()
        for opened in self._stores:
            opened.close()
        log.info("sentinel stopped", extra={"still_running": self.alive()})

    def alive(self) -> list[str]:
        return [t.name for t in self._threads if t.is_alive()]

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"sentinel-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _stage_loop(self, runner: stages.StageRunner) -> Callable[[], None]:
        """Step the runner; rest when idle until poked. Steps start at most every `step_interval`:
        under fleet traffic every POST pokes every stage, and a step per poke was several store
        transactions per event per stage; pokes within one interval now share a step (and a batch)."""
        interval = self.options.stage_step_seconds if runner.enabled else self.options.follow_step_seconds

        def loop() -> None:
            while not self.stop_event.is_set():
                seen = self.waker.generation
                started = time.monotonic()
                try:
                    progressed = runner.step()
                except Exception as exc:  # any error: the loop lives on (dsx.controllers.loops)
                    self.telemetry.stage_errors.labels(runner.name).inc()
                    self.loops.failed(f"stage {runner.name}", exc)
                    self.stop_event.wait(1.0)
                    continue
                self.loops.ok(f"stage {runner.name}")
                if not progressed:
                    self.waker.wait(seen, runner.idle_seconds(0.5))
                rest = started + interval - time.monotonic()
                if rest > 0:
                    self.stop_event.wait(rest)

        return loop

    def _poll_loop(
        self, step: Callable[[], Any], interval_seconds: float, *, name: str, always_wait: bool = False
    ) -> Callable[[], None]:
        def loop() -> None:
            while not self.stop_event.is_set():
                try:
                    busy = step()
                except Exception as exc:
                    self.loops.failed(name, exc)
                    self.stop_event.wait(max(interval_seconds, 1.0))
                    continue
                self.loops.ok(name)
                if always_wait or not busy:
                    self.stop_event.wait(interval_seconds)

        return loop

    def _validate(self) -> int:
        """Close a joining batch whose period is over, then run what the validation limit allows."""
        closed = self.joining.close_batch() if self.joining is not None else 0
        return closed + (self.validations.step() if self.validations is not None else 0)

    def _pump_kernel_logs(self) -> bool:
        """One round over every node's log, each read a bounded slice (`KernelLogMonitor` batch
        bounds), so a node flooding its log delays the others by one slice per round at most.
        True when there is more to do at once (events were stored, or a log has more waiting)."""
        created = 0
        behind = False
        for monitor in self.kernel_monitors:
            folded = monitor.repeats_suppressed
            try:
                created += monitor_source.pump(monitor, self.store)
            except Exception as exc:  # one node's log must not stop the others
                self.loops.failed(f"kernel-log {monitor.node_name}", exc)
            else:
                self.loops.ok(f"kernel-log {monitor.node_name}")
                behind = behind or monitor.behind
            finally:
                self.telemetry.kernel_log_repeats.inc(monitor.repeats_suppressed - folded)
        if created:
            self.telemetry.events_ingested.labels("kernel-log").inc(created)
            self.waker.poke()
        return bool(created) or behind

    def _watch_nodes(self) -> None:
        watch = self.client.watch_nodes(self.policy.gpu_node_selector, keep=kube_nodes.slim_node)
        self._node_view = watch
        while not self.stop_event.is_set():
            try:
                for change in watch.events(timeout_seconds=2.0):
                    self._on_node(change.type.value, change.object)
                    if self.stop_event.is_set():
                        return
            except Exception as exc:
                self.loops.failed("node watch", exc)
                self.stop_event.wait(1.0)
            else:
                self.loops.ok("node watch")

    def _watch_node_events(self) -> None:
        """Events on Nodes, newer than this start, into the store by rule (dsx.health.parsing.node_events)."""
        monitor = self.event_monitor
        assert monitor is not None
        watch = self.client.watch_events(self.policy.monitors.node_events_namespace, involved_kind="Node")
        while not self.stop_event.is_set():
            try:
                for change in watch.events(timeout_seconds=2.0):
                    if change.type.value in ("ADDED", "MODIFIED"):
                        found = monitor.observe(change.object)
                        if found:
                            created = sum(1 for a in self.store.append(found) if a.created)
                            self.telemetry.events_ingested.labels("node-events").inc(created)
                            self.waker.poke()
                    if self.stop_event.is_set():
                        return
            except Exception as exc:
                self.loops.failed("node events", exc)
                self.stop_event.wait(1.0)
            else:
                self.loops.ok("node events")

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        if kind == "DELETED":
            if self.kube_monitor is not None:
                self.kube_monitor.forget(name)
            return
        if self.kube_monitor is not None:
            found = self.kube_monitor.observe(node)
            if found:
                created = sum(1 for a in self.store.append(found) if a.created)
                self.telemetry.events_ingested.labels("kube").inc(created)
                self.waker.poke()
        if self.quarantine is not None:
            self.quarantine.reconcile(node)
        if self.joining is not None:
            self.joining.observe(node)

    def viewed_node(self, name: str) -> dict[str, Any] | None:
        """The node as the node watch last saw it, once the watch has listed (None: not seen)."""
        view = self._node_view
        if view is None or view.resource_version is None:
            return None
        return view.get(name)

    def fleet_nodes(self) -> list[dict[str, Any]]:
        """The selected nodes, slimmed: the node watch's view once it has listed, else a list call.

        At 10,000 nodes a list is ~60 MB of JSON decoded into Node models every few seconds;
        the watch already holds every node, kept current by its events."""
        view = self._node_view
        if view is not None and view.resource_version is not None:
            return list(view.objects.values())
        return [kube_nodes.slim_node(n) for n in self.nodes.list_nodes(dict(self.policy.gpu_node_selector))]

    def _account_fleet(self) -> bool:
        fleet = self.fleet_nodes()
        self._fleet_size = len(fleet)
        statuses = self.store.node_states()
        states = {s.node_name: s.state for s in statuses}
        held = self.policy.certification.taint.key
        capacity = goodput.capacity_by_bucket(fleet, states, held_taint=held)
        added = self._hours.observe(capacity, time.time())
        counts: dict[NodeState, int] = {}
        for node in fleet:
            state = states.get(str(node["metadata"]["name"]), NodeState.HEALTHY)
            counts[state] = counts.get(state, 0) + 1
        self.telemetry.fleet(capacity, added, counts)
        self.telemetry.breaker_tripped.set(1 if self.breaker.state() is breaker.BreakerState.TRIPPED else 0)
        return True

    def _account_consumers(self, store: EventStore) -> bool:
        """Each consumer's lag (events, seconds), lost history, dead letters: from the store alone."""
        consumers = pipeline_status.consumer_lag(store, datetime.now(UTC))
        self.telemetry.lag(consumers)
        self._halt_on_lost_history(consumers)
        parked: dict[str, int] = dict.fromkeys((s.value for s in PIPELINE), 0)
        for record in store.dead_letters():
            parked[record.stage] = parked.get(record.stage, 0) + 1
        for stage, count in parked.items():
            self.telemetry.dead_letters.labels(stage).set(count)
        return True

    def _halt_on_lost_history(self, consumers: Sequence[pipeline_status.ConsumerLag]) -> None:
        """A stage whose cursor is past the newest event stops claiming: what would come next under
        those sequences would be skipped. /readyz and `history` in loop_failing say why."""
        lost = {c.consumer: c.problem for c in consumers if c.problem}
        for runner in self.runners:
            runner.halted = lost.get(runner.name)
        if lost:
            error = errors.InternalError("; ".join(str(p) for p in lost.values()))
            self.loops.failed("history", error)
        else:
            self.loops.ok("history")

    def _watch_store(self) -> None:
        """Wake the stages when another process appends (PostgreSQL NOTIFY, or a poll for SQLite)."""
        watcher = self._open_store()
        seen = watcher.last_sequence()
        while not self.stop_event.is_set():
            try:
                if watcher.wait_for_events(seen, self.options.store_poll_seconds):
                    seen = watcher.last_sequence()
                    self.waker.poke()
            except Exception as exc:
                self.loops.failed("store watch", exc)
                self.stop_event.wait(1.0)
            else:
                self.loops.ok("store watch")

    # -- endpoints ------------------------------------------------------------------------------

    def ready(self) -> str | None:
        """Answered from state the loops keep, so a probe never waits on the store or the apiserver
        (kubelet gives up after 1 s): their last check comes from the readiness loop, and one that has
        not come back for `READINESS_STALE_SECONDS` is itself the reason."""
        if not self._started:
            return "starting"
        if self._dependencies is None:
            self._refresh_readiness()
        assert self._dependencies is not None
        why, checked = self._dependencies
        late = time.monotonic() - checked
        if late > READINESS_STALE_SECONDS:
            return f"the event store or the Kubernetes API has not answered for {late:.0f} s"
        if why is not None:
            return why
        dead = [t.name for t in self._threads if not t.is_alive()]
        if dead:
            return f"stopped: {', '.join(dead)}"
        failing = self.loops.failing()
        return "failing: " + "; ".join(f"{loop}: {error}" for loop, error in failing.items()) if failing else None

    def _refresh_readiness(self) -> None:
        """Ask the store and the API (the readiness loop's step; it may block while they hang)."""
        why: str | None = None
        try:
            self.store.last_sequence()
        except errors.DsxError as exc:
            why = f"event store: {exc}"
        else:
            if not self.client.ready():
                why = "the Kubernetes API is not ready"
        self._dependencies = (why, time.monotonic())

    def status(self) -> dict[str, Any]:
        return pipeline_status.document(self.store, self.breaker, now=datetime.now(UTC))

    def _yield_to_urgent(self) -> None:
        """A bulk post of routine events waits (at most `BULK_YIELD_SECONDS`) for expedited events to
        be handled: parsing it is CPU in this interpreter, which their cordon needs (the flood row of
        bench/bench_scale.py)."""
        if self.quarantine_runner is not None:
            self.quarantine_runner.yield_to_urgent(BULK_YIELD_SECONDS)

    def ingest(self, events: Sequence[HealthEvent]) -> dict[str, Any]:
        actionable = any(quarantine.may_cordon(e) for e in events)
        appended = self.ingestion.append(events, urgent=actionable)
        created = sum(1 for a in appended if a.created)
        self.telemetry.events_ingested.labels("http").inc(created)
        urgent = [a.sequence for a, e in zip(appended, events, strict=True) if a.created and quarantine.may_cordon(e)]
        if urgent and self.quarantine_runner is not None:
            self.quarantine_runner.expedite(urgent)  # claimed ahead of the routine traffic before it
        self.waker.poke()
        return {"accepted": len(appended), "created": created, "sequences": [a.sequence for a in appended]}


def status_document(store: EventStore, gate: breaker.CircuitBreaker | None) -> dict[str, Any]:
    """The pipeline status document (`dsx.health.decisions.pipeline_status.document`), for callers of the runtime."""
    return pipeline_status.document(store, gate, now=datetime.now(UTC))
