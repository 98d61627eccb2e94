"""Run a set of workload objects (Jobs, Services, ConfigMaps) as one named run, and read its pods.

Everything created carries the label `dsx.run/run=<run name>` (Jobs also on their pod
template), so a run can be waited on, read and deleted by name alone, even by a process that
did not create it (cleanup after an interrupt). This is the cluster side of certification's
`JobLauncher` port.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsx import errors, retry
from dsx.kube.client import KubeClient

RUN_LABEL = "dsx.run/run"
DEFAULT_NAMESPACE = "dsx-runs"
# kinds a run may create, deleted in this order (Jobs first: their pods go with them)
RUN_KINDS = (
    ("batch/v1", "Job"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
)
_TERMINAL = ("Succeeded", "Failed")


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


def _job_finished(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in job.get("status", {}).get("conditions") or []
    )


class RunLauncher:
    """Create, wait for, read and delete the objects of named runs in one namespace."""

    def __init__(self, client: KubeClient, *, namespace: str = DEFAULT_NAMESPACE, poll_seconds: float = 0.5) -> None:
        self._client = client
        self.namespace = namespace
        self._poll_seconds = poll_seconds

    def _labels(self, run_name: str) -> dict[str, str]:
        return {RUN_LABEL: run_name}

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None:
        """Apply the run's objects (server-side apply: re-running after a crash converges)."""
        self._client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        for original in objects:
            obj = copy.deepcopy(dict(original))
            meta = obj.setdefault("metadata", {})
            meta.setdefault("namespace", self.namespace)
            meta.setdefault("labels", {})[RUN_LABEL] = run_name
            if obj.get("kind") == "Job":
                template_meta = obj.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
                template_meta.setdefault("labels", {})[RUN_LABEL] = run_name
            self._client.apply(obj, force=True)

    def pods(self, run_name: str) -> list[dict[str, Any]]:
        return self._client.list_pods(self.namespace, labels=self._labels(run_name))

    def wait(self, run_name: str, deadline_seconds: float) -> Mapping[str, int | None]:
        """Node name → exit code of the run's pods once all ended (None for those still running at the deadline)."""
        codes: dict[str, int | None] = {}
        for _ in retry.attempts(timeout_seconds=deadline_seconds, backoff=retry.Backoff(self._poll_seconds)):
            jobs = self._client.list("batch/v1", "Job", self.namespace, labels=self._labels(run_name))
            pods = self.pods(run_name)
            codes = self._codes(pods)
            settled = all(_job_finished(j) for j in jobs) and all(code is not None for code in codes.values())
            if (pods or jobs) and settled:
                return codes
        return codes

    @staticmethod
    def _codes(pods: Sequence[Mapping[str, Any]]) -> dict[str, int | None]:
        """Per node: None while any of its pods runs, else its first non-zero exit code, else 0."""
        by_node: dict[str, list[int | None]] = {}
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            node = pod.get("spec", {}).get("nodeName")
            if node:
                by_node.setdefault(node, []).append(_exit_code(pod))
        codes: dict[str, int | None] = {}
        for node, exits in sorted(by_node.items()):
            failed = [c for c in exits if c]
            codes[node] = None if None in exits else (failed[0] if failed else 0)
        return codes

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
            for obj in self._client.list(api_version, kind, self.namespace, labels=self._labels(run_name)):
                self._client.delete(api_version, kind, obj["metadata"]["name"], self.namespace)


if TYPE_CHECKING:  # the domain port this class implements, held to it by mypy
    from dsx.certify.executor import JobLauncher

    def _implements(launcher: RunLauncher) -> JobLauncher:
        return launcher
