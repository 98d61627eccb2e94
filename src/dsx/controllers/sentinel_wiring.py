"""The sentinel's composition root: the one place that decides real or simulated.

`dsx sentinel run` (and the demo, and the benchmark) build their `SentinelRuntime` here. For a
cluster, three ports need something behind them, and each choice is made once, below:

- recertifier — real: `dsx.executors.recertify.ClusterRecertifier`, the certify engine's Kubernetes executor running
  the node-level categories in Jobs pinned to the node (`certification.image`); sim:
  `LocalRecertifier`, the node played by local processes;
- remediation provider — the policy's (`dsx.remediators`; `none` escalates to a person); its `sim` kind is the
  simulator's own (`dsx.sim.remediation`), also chosen on a sim when the policy names none;
- kernel logs — the policy's `monitors.kernel_logs`; on a sim, also every simulated node's kern.log.

A real cluster never gets a stand-in: with `recertify` or `validation` acting and no workload
image, the sentinel refuses to start and says why. This module is the only part of the
sentinel that imports `dsx.sim`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import msgspec

from dsx import errors, remediators
from dsx.controllers import kube_nodes
from dsx.controllers.sentinel import SentinelOptions, SentinelParts, SentinelRuntime
from dsx.executors import recertify as recertifiers
from dsx.health.decisions import recertify
from dsx.health.decisions.policy import KernelLogSource, ProviderKind, ProviderSettings, SentinelPolicy, Stage
from dsx.health.decisions.ports import NodeOps, Recertifier, RemediationProvider
from dsx.kube import incluster
from dsx.kube.client import KubeClient

SIM_PROVIDER_TIMEOUT_SECONDS = 120.0
"""A simulated reboot takes seconds; the policy's default (900 s) is sized for real machines."""


@dataclass(frozen=True)
class ClusterChoice:
    """Which cluster the sentinel acts on: a kubeconfig (real) or a `dsx sim` cluster by name."""

    kubeconfig: Path | None = None
    sim_name: str | None = None
    sim_root: Path | None = None
    """Where simulated clusters live (default: the dsx state directory's sim/)."""


def build(options: SentinelOptions, choice: ClusterChoice) -> SentinelRuntime:
    """The runtime for `choice`, every port wired (BadInputError when the cluster cannot be served honestly)."""
    parts = simulated(options.policy, choice) if choice.sim_name else real(options.policy, choice.kubeconfig)
    try:
        return SentinelRuntime(options, parts)
    except BaseException:
        parts.client.close()
        raise


def cluster_client(choice: ClusterChoice) -> KubeClient:
    """A client for the cluster `choice` names, for commands that only read it (`sentinel replay`)."""
    if choice.sim_name:
        from dsx.sim.cluster import SimCluster

        return SimCluster(choice.sim_name, root=choice.sim_root).client()
    return KubeClient(str(choice.kubeconfig))


def cluster_server(choice: ClusterChoice) -> str:
    """The apiserver URL of the cluster `choice` names, read from its kubeconfig without connecting."""
    from dsx.kube.client import server_of

    if choice.sim_name:
        from dsx.sim.cluster import SimCluster

        return server_of(SimCluster(choice.sim_name, root=choice.sim_root).kubeconfig)
    return server_of(incluster.require(choice.kubeconfig, "sentinel run", os.environ, alternative=" or --sim NAME"))


def real(policy: SentinelPolicy, kubeconfig: Path | None) -> SentinelParts:
    """A real cluster: certification runs on the node itself; nothing is simulated."""
    needed = _certification_needed(policy)
    if needed and not policy.certification.image:
        raise errors.BadInputError(
            f"sentinel run: {' and '.join(needed)} would certify nodes of a real cluster, which runs the "
            "node-level categories in pods on the node itself, but no workload image is configured: set "
            "certification.image in the policy (or pass --image IMAGE; an image with dsx[collectives], "
            "e.g. ghcr.io/dsx-run/dsx-workload) — the sentinel never stands in for a node with a local run"
        )
    client = KubeClient(incluster.require(kubeconfig, "sentinel run", os.environ, alternative=" or --sim NAME"))
    recertifier: Recertifier | None = None
    if policy.certification.image and (needed or policy.switch(Stage.VALIDATION).enabled):
        from dsx.kube import certify_jobs, jobs

        recertifier = recertifiers.ClusterRecertifier(
            policy.certification,
            jobs.RunLauncher(client, namespace=policy.certification.namespace, manage_namespace=False),
            lambda: certify_jobs.candidate_nodes(client),
            tolerations=recertify.held_tolerations(policy),
            choose_engine=lambda: certify_jobs.choose_engine(client, gang="none"),  # one node: nothing to gang
        )
    provider = _provider(policy.remediation.provider, kube_nodes.KubeNodeOps(client))
    return SentinelParts(client, provider, recertifier, policy.monitors.kernel_logs)


def simulated(policy: SentinelPolicy, choice: ClusterChoice) -> SentinelParts:
    """A `dsx sim` cluster: its kubeconfig, its nodes' kernel logs, the sim provider, local certification."""
    from dsx.sim.cluster import SimCluster

    assert choice.sim_name is not None
    sim = SimCluster(choice.sim_name, root=choice.sim_root)
    if sim.load_state() is None:
        raise errors.NotFoundError(
            f"--sim {choice.sim_name}: no simulated cluster by that name; start it with `dsx sim up`"
        )
    sources = list(policy.monitors.kernel_logs)
    known = {s.node for s in sources}
    sources.extend(
        KernelLogSource(name, str(sim.kernel_log(name))) for name in sim.status().node_names if name not in known
    )
    provider_settings = policy.remediation.provider
    if provider_settings.kind is ProviderKind.NONE:
        provider_settings = msgspec.structs.replace(
            provider_settings, kind=ProviderKind.SIM, timeout_seconds=SIM_PROVIDER_TIMEOUT_SECONDS
        )
    client = sim.client()
    provider = _provider(provider_settings, kube_nodes.KubeNodeOps(client))
    recertifier: Recertifier | None = None
    if _certification_needed(policy) or policy.switch(Stage.VALIDATION).enabled:
        recertifier = recertifiers.LocalRecertifier(policy.certification)
    return SentinelParts(client, provider, recertifier, tuple(sources))


def _certification_needed(policy: SentinelPolicy) -> list[str]:
    """The stages that would certify nodes: re-certification and validation, when acting."""
    return [s.value for s in (Stage.RECERTIFY, Stage.VALIDATION) if policy.switch(s).acting]


def _provider(settings: ProviderSettings, node_ops: NodeOps) -> RemediationProvider:
    """The policy's provider; `sim` (simulated nodes only: a reboot is a NotReady → Ready cycle) is the simulator's."""
    if settings.kind is ProviderKind.SIM:
        from dsx.sim.remediation import SimProvider

        return SimProvider(node_ops, timeout_seconds=settings.timeout_seconds)
    return remediators.build_provider(settings)
