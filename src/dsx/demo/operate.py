"""The operate half of the demo: the sentinel running, an Xid 79, and the node's way back into service.

The sentinel runtime (`dsx.controllers.sentinel`: kernel-log monitors → store → analyzer →
quarantine → drain → remediation → re-certification gate) runs in this process on the demo's
cluster, with a SQLite store and a policy file in the output folder (the shipped policy with
the cluster-changing stages switched on and a breaker sized for 8 nodes). The demo then does
what a GPU does: `dsx sim inject --fault xid79` appends the driver's line to one node's
kernel log. From there the demo only watches: each step waits for the node to reach the next
state of the pipeline's state machine in the store and checks the marks the pipeline left on
the Node and its pods. The sentinel's actions stream into the demo's timeline as they happen.
"""

from __future__ import annotations

import logging
import shutil
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from dsx import atomic, errors, retry, serialization
from dsx.demo import install, journal
from dsx.files import documents, health_files

if TYPE_CHECKING:
    from dsx.controllers.sentinel import SentinelRuntime
    from dsx.demo.lifecycle import Demo
    from dsx.health.decisions.eventstore import EventStore, NodeTransition
    from dsx.model.health import NodeState

SENTINEL_DIR = "sentinel"
POLICY_FILE = "sentinel/policy.yaml"
STORE_FILE = "sentinel/events.db"
LOG_FILE = "sentinel/sentinel.log"
STATUS_FILE = "sentinel/status.json"
OWNER = "dsx-demo"
LEASE_NAME = "dsx-sentinel"
"""The chart's `leaderElection.leaseName` default, which the catalog's Lease assert names."""
BREAKER_MAX_QUARANTINED_PERCENT = 25.0
"""The shipped 10 % trips on the first of 8 nodes (12.5 %); 25 % lets one or two through, not three."""
FAULT = "xid79"
FAULT_TITLE = "Xid 79 (GPU has fallen off the bus)"

READY_TIMEOUT_SECONDS = 60.0
QUARANTINE_TIMEOUT_SECONDS = 30.0
DRAIN_TIMEOUT_SECONDS = 60.0
REMEDIATION_TIMEOUT_SECONDS = 150.0
"""The sim provider's reboot waits up to 120 s for the node to come back."""
RECERTIFICATION_TIMEOUT_SECONDS = 300.0
"""A worker server importing torch plus two node-level categories, on a busy 2-core machine."""
RESCHEDULE_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.2


def sentinel_namespace(demo: Demo) -> str:
    """Where the recipe installs dsx-sentinel (its Lease lives there)."""
    assert demo.recipe is not None
    return next((c.namespace for c in demo.recipe.component_refs if c.name == "dsx-sentinel"), "dsx-system")


def sentinel_available() -> str | None:
    """None when the sentinel runtime is in this build, else why not."""
    import importlib.util

    if importlib.util.find_spec("dsx.controllers") is None:
        return "the sentinel pipeline (dsx.controllers) is not in this build"
    if importlib.util.find_spec("dsx.controllers.sentinel") is None:
        return "the sentinel runtime (dsx.controllers.sentinel) is not in this build"
    return None


def demo_policy(default: dict[str, Any]) -> dict[str, Any]:
    """The shipped policy with quarantine, drain, remediation and re-certification acting."""
    policy = dict(default)
    stages = {name: dict(switch) for name, switch in (policy.get("stages") or {}).items()}
    for stage in ("quarantine", "drain", "remediation", "recertify"):
        stages[stage] = {"enabled": True, "dryRun": False}
    policy["stages"] = stages
    policy["breaker"] = {**(policy.get("breaker") or {}), "maxQuarantinedPercent": BREAKER_MAX_QUARANTINED_PERCENT}
    return policy


class TimelineHandler(logging.Handler):
    """Sentinel actions (logger `dsx.sentinel.actions`) as timeline entries, live."""

    def __init__(self, log: journal.Journal) -> None:
        super().__init__(logging.INFO)
        self.journal = log

    def emit(self, record: logging.LogRecord) -> None:
        stage = getattr(record, "stage", "")
        action = getattr(record, "action", "")
        node = str(getattr(record, "node", ""))
        self.journal.note(f"sentinel {stage}: {action} {node}".strip(), source="sentinel", node=node)


class Steps:
    """The operate steps: `start` runs the sentinel (and registers its stop on the demo's exit stack),
    `run` the fault and the node's way back."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.node = demo.options.xid_node
        self.runtime: SentinelRuntime | None = None
        self.store: EventStore | None = None
        self.fault_at = 0.0
        self._seen = 0
        self._pods_at_fault: list[str] = []

    def start(self, stack: ExitStack) -> None:
        """The sentinel step (the demo validates while it runs); `run` takes it from there."""
        stack.callback(self.stop)
        self.demo.log.run("sentinel", "sentinel", self._start, needs=["cluster", "recipe"])

    def run(self) -> None:
        log = self.demo.log
        log.run("fault", "Xid 79", self._inject, needs=["sentinel"])
        log.run("quarantine", "quarantine", self._quarantined, needs=["fault"])
        log.run("drain", "drain", self._drained, needs=["quarantine"])
        log.run("remediate", "remediate", self._remediated, needs=["drain"])
        log.run("recertify", "re-certify", self._recertified, needs=["remediate"])
        log.run("uncordon", "uncordon", self._uncordoned, needs=["recertify"])

    # ---- start and stop --------------------------------------------------------------------------

    def _start(self) -> str:
        missing = sentinel_available()
        if missing is not None:
            raise errors.UnavailableError(f"cannot start the sentinel: {missing}")
        from dsx import logs
        from dsx.controllers import sentinel as runtime_module
        from dsx.controllers import sentinel_wiring
        from dsx.health.decisions import policy as policy_module
        from dsx.kube import leader
        from dsx.store import open_store

        demo = self.demo
        folder = demo.path(SENTINEL_DIR)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        shipped = documents.load_mapping_file(policy_module.DEFAULT_PATH)
        demo.path(POLICY_FILE).write_text(serialization.dump_yaml(demo_policy(shipped)), encoding="utf-8")
        chosen = health_files.sentinel_policy(demo.path(POLICY_FILE))
        store_url = f"sqlite:///{demo.path(STORE_FILE)}"
        self._capture_logs(logs.JsonFormatter())
        options = runtime_module.SentinelOptions(
            policy=chosen,
            store_url=store_url,
            state_dir=folder / "state",
            port=0,
            owner=OWNER,
            # the Lease the chart's sentinel holds: validation judges the installed component by it
            election=leader.ElectionSettings(
                namespace=sentinel_namespace(demo), name=LEASE_NAME, identity=f"{OWNER}-sentinel"
            ),
        )
        choice = sentinel_wiring.ClusterChoice(sim_name=demo.cluster.name, sim_root=demo.cluster.root)
        self.runtime = sentinel_wiring.build(options, choice)
        self.runtime.start()
        self.store = open_store(store_url)
        for _ in retry.attempts(timeout_seconds=READY_TIMEOUT_SECONDS, backoff=retry.Backoff(POLL_SECONDS)):
            why = self.runtime.ready() or (
                None if self.runtime.elector and self.runtime.elector.leading else "electing"
            )
            if why is None:
                break
        else:
            raise errors.DeadlineExceededError(f"the sentinel did not become ready: {why}")
        for role, relative in (
            ("sentinelPolicy", POLICY_FILE),
            ("sentinelStore", STORE_FILE),
            ("sentinelLog", LOG_FILE),
        ):
            demo.artifact(role, relative)
        port = self.runtime.http.port if self.runtime.http is not None else 0
        monitors = len(self.runtime.kernel_monitors)
        return (
            f"pipeline in-process: {monitors} kernel-log monitors, quarantine → drain → remediation (sim) → "
            f"re-certification acting; store {STORE_FILE}; /metrics on 127.0.0.1:{port}"
        )

    def _capture_logs(self, formatter: logging.Formatter) -> None:
        """Sentinel logs go to sentinel/sentinel.log as JSON lines, and its actions to the timeline."""
        logger = logging.getLogger("dsx")
        to_file = logging.FileHandler(self.demo.path(LOG_FILE), encoding="utf-8")
        to_file.setFormatter(formatter)
        to_timeline = TimelineHandler(self.demo.log)
        to_timeline.addFilter(lambda record: record.name == "dsx.sentinel.actions")
        self._handlers = [to_file, to_timeline]
        for handler in self._handlers:
            logger.addHandler(handler)
        self._level, self._propagate = logger.level, logger.propagate
        logger.setLevel(logging.INFO)
        logger.propagate = False

    def stop(self) -> None:
        if self.runtime is not None:
            self.runtime.stop()
            self.runtime = None
            self._write_status()
        if self.store is not None:
            self.store.close()
            self.store = None
        logger = logging.getLogger("dsx")
        for handler in getattr(self, "_handlers", []):
            logger.removeHandler(handler)
            handler.close()
        if getattr(self, "_handlers", None):
            logger.setLevel(self._level)
            logger.propagate = self._propagate
            self._handlers = []

    def _write_status(self) -> None:
        from dsx.controllers import sentinel as runtime_module

        if self.store is None:
            return
        document = runtime_module.status_document(self.store, None)
        atomic.write_file(self.demo.path(STATUS_FILE), serialization.dump_json(document))
        self.demo.artifact("sentinelStatus", STATUS_FILE)

    # ---- the fault ---------------------------------------------------------------------------------

    def _inject(self) -> str:
        from dsx.sim import faults

        # the drain is quick: remember what ran on the node before the fault to report what it evicted
        self._pods_at_fault = self._workload_pods_on_node()
        self.fault_at = time.monotonic()
        injection = faults.inject(self.demo.cluster, self.node, FAULT)
        line = injection.actions[0].split(": ", 1)[-1]
        self.demo.log.note(f"kernel log of {self.node}: {line}", source="sim", node=self.node)
        return f"dsx sim inject --node {self.node} --fault {FAULT}: NVRM line appended to its kernel log"

    # ---- watching the pipeline ----------------------------------------------------------------------

    def _history(self) -> list[NodeTransition]:
        assert self.store is not None
        history = self.store.node_history(self.node)
        for move in history[self._seen :]:
            self.demo.log.note(
                f"{self.node}: {move.from_state.value} → {move.to_state.value} ({move.reason})",
                source="sentinel",
                node=self.node,
            )
        self._seen = max(self._seen, len(history))
        return history

    def _wait_for(self, target: NodeState, timeout_seconds: float, *, after: NodeState | None = None) -> float:
        """Wait until the node's history reaches `target` (after `after`, when given); seconds since the fault."""
        from dsx.model.health import NodeState

        states: list[NodeState] = []
        for _ in retry.attempts(timeout_seconds=timeout_seconds, backoff=retry.Backoff(POLL_SECONDS)):
            history = self._history()
            states = [m.to_state for m in history]
            start = states.index(after) + 1 if after is not None and after in states else 0
            if target in states[start:] and (after is None or after in states):
                return time.monotonic() - self.fault_at
            if states and states[-1] is NodeState.FAILED:
                raise journal.StepFailedError(f"{self.node} went to failed: {history[-1].reason}")
        seen = " → ".join(s.value for s in states) or "no state change"
        raise errors.DeadlineExceededError(
            f"{self.node} did not reach {target.value} within {timeout_seconds:.0f} s (so far: {seen})"
        )

    def _node(self) -> dict[str, Any]:
        assert self.demo.kube is not None
        return self.demo.kube.get_node(self.node)

    def _quarantined(self) -> str:
        from dsx.health.decisions import nodes as health_nodes
        from dsx.model.health import NodeState

        seconds = self._wait_for(NodeState.QUARANTINED, QUARANTINE_TIMEOUT_SECONDS)
        # the sentinel records the transition before it writes the node (crash safety), so the
        # cordon may follow the store by a moment: wait for it, within the same budget
        for _ in retry.attempts(timeout_seconds=QUARANTINE_TIMEOUT_SECONDS, backoff=retry.Backoff(POLL_SECONDS)):
            node = self._node()
            taints = [t for t in health_nodes.taints(node) if str(t.get("key", "")).startswith(health_nodes.PREFIX)]
            if health_nodes.unschedulable(node) and taints:
                break
        else:
            raise journal.StepFailedError(
                f"{self.node} is in quarantine in the store but not cordoned and tainted "
                f"within {QUARANTINE_TIMEOUT_SECONDS:.0f} s"
            )
        shown = ", ".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints)
        reason = health_nodes.annotations_of(node).get(health_nodes.REASON_ANNOTATION, "")
        rule = reason.split(":", 1)[0]
        after = f"{seconds:.1f} s after the Xid line"
        return f"{self.node} cordoned and tainted {shown} {after} ({self._event()}; rule {rule})"

    def _event(self) -> str:
        """The stored event that opened the incident, in a few words."""
        assert self.store is not None
        fatal = [s.event for s in self.store.events(node_name=self.node) if s.event.is_fatal]
        if not fatal:
            return "no fatal event stored"
        event = fatal[0]
        codes = ",".join(event.error_codes)
        return f"event {event.check_name} {codes}, fatal, action {event.recommended_action.name}"

    def _drained(self) -> str:
        from dsx.model.health import NodeState

        assert self.demo.kube is not None
        before = self._pods_at_fault
        seconds = self._wait_for(NodeState.DRAINED, DRAIN_TIMEOUT_SECONDS)
        left = self._workload_pods_on_node()
        if left:
            raise journal.StepFailedError(f"{self.node} drained in the store, yet {', '.join(left)} still run there")
        evicted = ", ".join(before) or "no workload pod"
        return (
            f"evicted {evicted} through the Eviction API (PodDisruptionBudget maxUnavailable "
            f"{install.WORKLOAD_MAX_UNAVAILABLE} honoured) {seconds:.1f} s after the fault; DaemonSet pods stay"
        )

    def _workload_pods_on_node(self) -> list[str]:
        assert self.demo.kube is not None
        return sorted(
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in self.demo.kube.pods_on_node(self.node)
            if p["metadata"]["namespace"] == install.WORKLOAD_NAMESPACE and not p["metadata"].get("deletionTimestamp")
        )

    def _remediated(self) -> str:
        from dsx.model.health import NodeState

        seconds = self._wait_for(NodeState.RECERTIFYING, REMEDIATION_TIMEOUT_SECONDS, after=NodeState.REMEDIATING)
        history = self._history()
        remediation = next((m.reason for m in history if m.to_state is NodeState.REMEDIATING), "")
        finished = next((m.reason for m in history if m.to_state is NodeState.RECERTIFYING), "")
        return f"{remediation}; {finished} ({seconds:.1f} s after the fault)"

    def _recertified(self) -> str:
        from dsx.model.health import NodeState

        seconds = self._wait_for(NodeState.HEALTHY, RECERTIFICATION_TIMEOUT_SECONDS, after=NodeState.RECERTIFYING)
        assert self.store is not None
        requests = [r for r in self.store.validation_requests() if r.node_name == self.node]
        if not requests:
            raise journal.StepFailedError(f"{self.node} is healthy but no re-certification request was stored")
        request = requests[-1]
        self._record_remediated()
        return (
            f"request {request.request_id} {request.status.value}: {self._categories()} through the certify "
            f"engine (local executor, real gloo) before the uncordon; {seconds:.1f} s after the fault"
        )

    def _categories(self) -> str:
        if self.runtime is None:
            return "node-level categories"
        settings = self.runtime.policy.certification
        names = [c.name + (f" ({c.scale.value})" if c.scale else "") for c in settings.categories]
        return f"{', '.join(names)} on {settings.ranks_per_node} ranks"

    def _record_remediated(self) -> None:
        history = self._history()
        self.demo.outcome.remediated.append(
            {
                "node": self.node,
                "fault": FAULT_TITLE,
                "states": [m.to_state.value for m in history],
                "finalState": history[-1].to_state.value if history else "",
                "history": [
                    {"from": m.from_state.value, "to": m.to_state.value, "at": m.at.isoformat(), "reason": m.reason}
                    for m in history
                ],
            }
        )

    def _uncordoned(self) -> str:
        from dsx.health.decisions import nodes as health_nodes

        node = self._node()
        marks = [t["key"] for t in health_nodes.taints(node) if str(t.get("key", "")).startswith(health_nodes.PREFIX)]
        marks += [k for k in health_nodes.labels_of(node) if k == health_nodes.STATE_LABEL]
        if health_nodes.unschedulable(node) or marks:
            left = ", ".join(marks) or "unschedulable"
            raise journal.StepFailedError(f"{self.node} is healthy in the store but still held: {left}")
        for _ in retry.attempts(timeout_seconds=RESCHEDULE_TIMEOUT_SECONDS, backoff=retry.Backoff(0.5)):
            if pods := self._workload_pods_on_node():
                break
        back = f"; {pods[0]} scheduled back onto it" if pods else "; no workload pod rescheduled yet"
        return f"{self.node} schedulable again, the sentinel's taints, labels and annotations removed{back}"
