"""Run a set of workload objects (TrainJobs, Jobs, Services, ConfigMaps) as one named run, and read its pods.

Everything created carries the label `dsx.run/run=<run name>` (Jobs on their pod template,
TrainJobs on every pod template override, so Trainer's pods carry it too), so a run can be
waited on, read and deleted by name alone, even by a process that did not create it (cleanup
after an interrupt). This is the cluster side of certification's `JobLauncher` port.

Waiting fails fast: a pod the scheduler cannot place, or whose container cannot start (image
pull back-off, a missing Secret or ConfigMap), is reported to `notice` as soon as it is seen
and ends the wait once it has lasted `start_grace_seconds`, with the reason, instead of
holding the run (and the GPUs its other pods took) until the run's deadline. A run that
creates no pods at all within the grace ends the same way, with the warnings its objects got.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsx import errors, retry
from dsx.certify.executor import RunStatus
from dsx.kube.client import KubeClient

RUN_LABEL = "dsx.run/run"
DEFAULT_NAMESPACE = "dsx-runs"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
# kinds a run may create, deleted in this order (owners first: their children go with them)
RUN_KINDS = (
    (TRAINER_API, "TrainJob"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
)
CERTIFICATION_KINDS = (*RUN_KINDS, (TRAINER_API, "TrainingRuntime"))
"""What one certification may leave: its runs, and the training runtimes it made for them."""
_TERMINAL = ("Succeeded", "Failed")
START_GRACE_SECONDS = 15.0
"""How long a scheduling or start problem may last before the run ends with it (a pull may retry once)."""
NO_PODS_GRACE_SECONDS = 30.0
"""A run whose objects made no pod at all in this long ends: whatever should create them refused."""
_START_PROBLEMS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
NOT_SCHEDULED = "NotScheduled"
"""A pod no scheduler has looked at (its scheduler is not running); reported after `QUIET_SECONDS`."""
QUIET_SECONDS = 5.0
"""A new pod waits a moment for its scheduler: only after this is "not scheduled" worth saying."""
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ROLE_LABEL = "certify.dsx.run/role"
NODE_RANK_LABEL = "certify.dsx.run/node-rank"


def _exit_code(pod: Mapping[str, Any]) -> int | None:
    """First non-zero container exit code, else 0 once the pod ended; None while it runs."""
    status = pod.get("status", {})
    if status.get("phase") not in _TERMINAL:
        return None
    codes = [
        int(c["state"]["terminated"].get("exitCode", 0))
        for c in status.get("containerStatuses") or []
        if c.get("state", {}).get("terminated")
    ]
    failed = [c for c in codes if c != 0]
    if failed:
        return failed[0]
    # a Failed pod whose containers all exited 0 (or never ran) still failed
    return 0 if status.get("phase") == "Succeeded" else 1


def problem(pod: Mapping[str, Any]) -> str:
    """Why a pod is not running: `Unschedulable: 0/8 nodes are available: …`, `ImagePullBackOff: …`; "" if none."""
    status = pod.get("status", {})
    if status.get("phase") not in (None, "Pending"):
        return ""
    conditions = status.get("conditions") or []
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message', '').strip()}".rstrip(": ")
    spec = pod.get("spec", {})
    if not spec.get("nodeName") and not any(c.get("type") == "PodScheduled" for c in conditions):
        scheduler = spec.get("schedulerName") or "default-scheduler"
        return f"{NOT_SCHEDULED}: no scheduler has taken the pod (schedulerName {scheduler}: is it running?)"
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = container.get("state", {}).get("waiting") or {}
        reason = waiting.get("reason", "")
        if reason in _START_PROBLEMS:
            return f"{reason}: {waiting.get('message', '').strip()}".rstrip(": ")
    return ""


def _finished(obj: Mapping[str, Any]) -> str:
    """ "Complete"/"Failed" for a finished Job or TrainJob (its conditions), else ""."""
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return ""


@dataclass
class _Seen:
    why: str
    since: float
    told: bool = False


class RunLauncher:
    """Create, wait for, read and delete the objects of named runs in one namespace."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        poll_seconds: float = 0.5,
        start_grace_seconds: float = START_GRACE_SECONDS,
        no_pods_grace_seconds: float = NO_PODS_GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        manage_namespace: bool = True,
    ) -> None:
        """`manage_namespace`: apply the namespace before the objects (`dsx certify`). The sentinel's
        is the chart's, with Pod Security labels its account may not change."""
        self._client = client
        self.namespace = namespace
        self._manage_namespace = manage_namespace
        self._poll_seconds = poll_seconds
        self._start_grace = start_grace_seconds
        self._no_pods_grace = no_pods_grace_seconds
        self._clock = clock
        self._served: dict[tuple[str, str], bool] = {}

    def _ensure_namespace(self) -> None:
        if self._manage_namespace:
            self._client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})

    def _labels(self, run_name: str) -> dict[str, str]:
        return {RUN_LABEL: run_name}

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the cluster serves this kind (TrainJob needs Kubeflow Trainer's CRDs)."""
        key = (api_version, kind)
        if key not in self._served:
            try:
                self._client.list(api_version, kind, self.namespace, labels={RUN_LABEL: "probe"})
                self._served[key] = True
            except errors.NotFoundError:
                self._served[key] = False
        return self._served[key]

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None:
        """Apply the run's objects (server-side apply: re-running after a crash converges)."""
        self._ensure_namespace()
        for original in objects:
            obj = copy.deepcopy(dict(original))
            meta = obj.setdefault("metadata", {})
            meta.setdefault("namespace", self.namespace)
            meta.setdefault("labels", {})[RUN_LABEL] = run_name
            if obj.get("kind") == "Job":
                template_meta = obj.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
                template_meta.setdefault("labels", {})[RUN_LABEL] = run_name
            if obj.get("kind") == "TrainJob":
                for override in obj.setdefault("spec", {}).get("podTemplateOverrides") or []:
                    override.setdefault("metadata", {}).setdefault("labels", {})[RUN_LABEL] = run_name
            self._client.apply(obj, force=True)

    def apply(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Apply objects that outlive one run (a certification's training runtimes)."""
        self._ensure_namespace()
        for original in objects:
            obj = copy.deepcopy(dict(original))
            obj.setdefault("metadata", {}).setdefault("namespace", self.namespace)
            self._client.apply(obj, force=True)

    def pods(self, run_name: str) -> list[dict[str, Any]]:
        return self._client.list_pods(self.namespace, labels=self._labels(run_name))

    def wait(self, run_name: str, deadline_seconds: float, notice: Callable[[str], None] | None = None) -> RunStatus:
        """Until every pod ended (or its TrainJob finished), the deadline passed, or pods cannot start."""
        tell = notice or (lambda _: None)
        began = self._clock()
        seen: dict[str, _Seen] = {}
        status = RunStatus()
        for _ in retry.attempts(timeout_seconds=deadline_seconds, backoff=retry.Backoff(self._poll_seconds)):
            owners = self._owners(run_name)
            pods = self.pods(run_name)
            trainjobs = [o for o in owners if o["kind"] == "TrainJob"]
            if trainjobs:  # Trainer decides when its run is over (an MPI node's sshd never exits)
                done = all(_finished(o) for o in trainjobs)
            else:
                done = all(_finished(o) for o in owners if o["kind"] == "Job")
            codes, order, roles = self._codes(pods, owner_finished=bool(trainjobs) and done)
            problems = self._problems(pods, seen, tell)
            status = RunStatus(exit_codes=codes, problems=problems, order=order, roles=roles, finished=done)
            if (pods or owners) and done and all(c is not None for c in codes.values()):
                return status
            stuck = self._stuck(seen, pods, owners, run_name, began)
            if stuck:
                tell(f"run {run_name} cannot start: {stuck}")
                reasons = {problem(p).split(":", 1)[0] for p in pods}
                alike = bool(pods) and len(reasons) == 1 and "" not in reasons
                return RunStatus(
                    exit_codes=codes, not_started=stuck, problems=problems, order=order, roles=roles, alike=alike
                )
        return status

    def _owners(self, run_name: str) -> list[dict[str, Any]]:
        found = []
        for api_version, kind in ((TRAINER_API, "TrainJob"), ("batch/v1", "Job")):
            if kind == "TrainJob" and not self.serves(api_version, kind):
                continue
            found += self._client.list(api_version, kind, self.namespace, labels=self._labels(run_name))
        return found

    def _problems(
        self, pods: Sequence[Mapping[str, Any]], seen: dict[str, _Seen], tell: Callable[[str], None]
    ) -> dict[str, str]:
        now = self._clock()
        current: dict[str, str] = {}
        for pod in pods:
            name = pod["metadata"]["name"]
            why = problem(pod)
            if not why:
                seen.pop(name, None)
                continue
            node = pod.get("spec", {}).get("nodeName") or ""
            if name not in seen or seen[name].why != why:
                seen[name] = _Seen(why, seen[name].since if name in seen else now)
                seen[name].told = False
            if why.startswith(NOT_SCHEDULED) and now - seen[name].since < QUIET_SECONDS:
                continue
            current[node or name] = why
            if not seen[name].told:
                tell(f"pod {name}{f' on {node}' if node else ''}: {why}")
                seen[name].told = True
        for name in [n for n in seen if n not in {p["metadata"]["name"] for p in pods}]:
            del seen[name]
        return current

    def _stuck(
        self,
        seen: Mapping[str, _Seen],
        pods: Sequence[Mapping[str, Any]],
        owners: Sequence[Mapping[str, Any]],
        run_name: str,
        began: float,
    ) -> str:
        now = self._clock()
        lasting = sorted(
            (s.why, name)
            for name, s in seen.items()
            if now - s.since >= self._start_grace + (QUIET_SECONDS if s.why.startswith(NOT_SCHEDULED) else 0.0)
        )
        if lasting:
            why, name = lasting[0]
            others = len(lasting) - 1
            return f"{why} (pod {name}" + (f" and {others} more)" if others else ")")
        if not pods and now - began >= self._no_pods_grace:
            warnings = self._warnings(run_name, owners)
            return f"no pod was created within {self._no_pods_grace:.0f} s" + (f": {warnings}" if warnings else "")
        return ""

    def _warnings(self, run_name: str, owners: Sequence[Mapping[str, Any]]) -> str:
        """The last Warning events (and False conditions) of the run's own objects: why nothing ran."""
        names = {o["metadata"]["name"] for o in owners} | {run_name}
        said = []
        for event in self._client.list("v1", "Event", self.namespace):
            involved = event.get("involvedObject", {})
            if event.get("type") == "Warning" and involved.get("name") in names:
                said.append(f"{involved.get('kind', '')} {event.get('reason', '')}: {event.get('message', '')}".strip())
        for owner in owners:
            for condition in owner.get("status", {}).get("conditions") or []:
                if condition.get("status") == "False" and condition.get("message"):
                    said.append(f"{owner['kind']} {condition.get('type')}: {condition['message']}")
        return "; ".join(dict.fromkeys(said[-3:]))

    @staticmethod
    def _codes(
        pods: Sequence[Mapping[str, Any]], *, owner_finished: bool = False
    ) -> tuple[dict[str, int | None], tuple[str, ...], dict[str, str]]:
        """Per node: None while any of its pods runs, else its first non-zero exit code, else 0;
        the nodes in rank order (a launcher first, then by completion index or node rank); their roles.

        Once the run's TrainJob finished, a pod still running served its part (an MPI node's sshd)
        and counts as 0."""
        by_node: dict[str, list[int | None]] = {}
        ranks: dict[str, tuple[int, int, str]] = {}
        roles: dict[str, str] = {}
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            node = pod.get("spec", {}).get("nodeName")
            if not node:
                continue
            code = _exit_code(pod)
            by_node.setdefault(node, []).append(0 if code is None and owner_finished else code)
            labels = pod["metadata"].get("labels") or {}
            annotations = pod["metadata"].get("annotations") or {}
            role = labels.get(REPLICATED_JOB_LABEL) or labels.get(ROLE_LABEL) or "node"
            index = annotations.get(COMPLETION_INDEX) or labels.get(COMPLETION_INDEX) or labels.get(NODE_RANK_LABEL)
            index = index or "0"
            ranks[node] = (0 if role == "launcher" else 1, int(index) if str(index).isdigit() else 0, node)
            roles[node] = role
        codes: dict[str, int | None] = {}
        for node, exits in sorted(by_node.items()):
            failed = [c for c in exits if c]
            codes[node] = None if None in exits else (failed[0] if failed else 0)
        order = tuple(node for node, _ in sorted(ranks.items(), key=lambda item: item[1]))
        return codes, order, roles

    def logs(self, run_name: str, node: str) -> str:
        """The log (with kubelet timestamps) of the run's pod(s) on `node`."""
        on_node = [p for p in self.pods(run_name) if p.get("spec", {}).get("nodeName") == node]
        if not on_node:
            raise errors.NotFoundError(f"run {run_name}: no pod on node {node} in namespace {self.namespace}")
        return "".join(
            self._client.pod_logs(self.namespace, p["metadata"]["name"], timestamps=True)
            for p in sorted(on_node, key=lambda p: p["metadata"]["name"])
        )

    def delete(self, run_name: str) -> None:
        """Delete everything labelled with the run (idempotent)."""
        for api_version, kind in RUN_KINDS:
            if kind == "TrainJob" and not self.serves(api_version, kind):
                continue
            for obj in self._client.list(api_version, kind, self.namespace, labels=self._labels(run_name)):
                self._client.delete(api_version, kind, obj["metadata"]["name"], self.namespace)

    def delete_labelled(self, labels: Mapping[str, str], kinds: Sequence[tuple[str, str]]) -> list[str]:
        """Delete every object of `kinds` carrying `labels`; `Kind/name` of each (idempotent)."""
        found = []
        for api_version, kind in kinds:
            if api_version == TRAINER_API and not self.serves(api_version, kind):
                continue
            for obj in self._client.list(api_version, kind, self.namespace, labels=dict(labels)):
                found.append(f"{kind}/{obj['metadata']['name']}")
                self._client.delete(api_version, kind, obj["metadata"]["name"], self.namespace)
        return found


if TYPE_CHECKING:  # the domain port this class implements, held to it by mypy
    from dsx.certify.executor import JobLauncher

    def _implements(launcher: RunLauncher) -> JobLauncher:
        return launcher
