"""`dsx snapshot`: capture what a cluster and its hosts are (cluster, `node`, `merge`).

Only click is imported at module level; the Kubernetes adapter and the collectors load inside
the commands. Outputs are files, stdout, or `cm://NAMESPACE/NAME` (a ConfigMap, so the
in-cluster agent in deploy/snapshot-agent needs no volume to hand its result back).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsx import __version__
from dsx.cli import output as cli_output
from dsx.errors import BadInputError

if TYPE_CHECKING:
    from dsx.kube.client import KubeClient
    from dsx.model.snapshot import Snapshot
    from dsx.validation.reading import ClusterReader

GENERATOR = f"dsx/{__version__}"
CONFIGMAP_SCHEME = "cm://"
NODE_SNAPSHOT_LABEL = "dsx.run/snapshot"
SNAPSHOT_KEY = "snapshot.yaml"
AICR_FORMAT = "aicr"
snapshot_format_options = cli_output.format_options_for((*cli_output.FORMATS, AICR_FORMAT))


def snapshot_document(snap: Any, fmt: str) -> tuple[dict[str, Any], str]:
    """The document to write and the format to write it in (`aicr` is AICR's document as YAML)."""
    if fmt.lower() == AICR_FORMAT:
        from dsx.model import aicr

        return aicr.snapshot_to_aicr(snap, version=GENERATOR), "yaml"
    return snap.to_dict(), fmt


def capture_time() -> str:
    """Now in RFC 3339 UTC seconds; `SOURCE_DATE_EPOCH` pins it for reproducible output."""
    pinned = os.environ.get("SOURCE_DATE_EPOCH")
    if pinned:
        try:
            moment = datetime.fromtimestamp(int(pinned), UTC)
        except ValueError as exc:
            raise BadInputError(f"SOURCE_DATE_EPOCH: {pinned!r} is not an integer number of seconds") from exc
    else:
        moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def kube_client(kubeconfig: str | None, context: str | None) -> KubeClient:
    """--kubeconfig, else $KUBECONFIG, else ~/.kube/config, else the pod's service account (as kubectl)."""
    from dsx.kube.client import KubeClient
    from dsx.kube.incluster import require

    current = click.get_current_context(silent=True)
    found = require(kubeconfig, current.command_path if current else "dsx", os.environ)
    return KubeClient(found, context=context)


def cluster_snapshot(reader: ClusterReader) -> Snapshot:
    """A cluster snapshot read through `reader` (dsx.kube's KubeClient satisfies the protocol)."""
    from dsx.validation import cluster_snapshot as collector

    return collector.collect(reader, generator=GENERATOR, captured_at=capture_time())


def load_snapshots(paths: tuple[str, ...] | list[str]) -> list[Any]:
    from dsx.files import documents

    return [documents.snapshot_file(p) for p in paths]


def node_snapshots_from_configmaps(client: Any, namespace: str) -> list[Any]:
    """Node snapshots the in-cluster agent left in ConfigMaps labelled dsx.run/snapshot=node."""
    from dsx import serialization
    from dsx.model import snapshot

    found = []
    for cm in client.list("v1", "ConfigMap", namespace, labels={NODE_SNAPSHOT_LABEL: "node"}):
        name = f"cm://{namespace}/{cm['metadata']['name']}"
        text = (cm.get("data") or {}).get(SNAPSHOT_KEY)
        if text:
            found.append(snapshot.Snapshot.from_dict(serialization.parse_yaml(text, source=name), source=name))
    return found


def _configmap_target(output: str) -> tuple[str, str]:
    rest = output.removeprefix(CONFIGMAP_SCHEME)
    namespace, _, name = rest.partition("/")
    if not namespace or not name or "/" in name:
        raise BadInputError(f"-o {output}: expected cm://NAMESPACE/NAME")
    return namespace, name


def emit_snapshot(snap: Any, fmt: str, output: str | None, *, kubeconfig: str | None, context: str | None) -> None:
    """Write the snapshot to stdout, a file, or a ConfigMap (`cm://NAMESPACE/NAME`, server-side applied)."""
    document, fmt = snapshot_document(snap, fmt)
    if output and output.startswith(CONFIGMAP_SCHEME):
        from dsx import serialization

        namespace, name = _configmap_target(output)
        kind = "node" if snap.cluster is None else "cluster"
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {NODE_SNAPSHOT_LABEL: kind}},
            "data": {SNAPSHOT_KEY: serialization.dump_yaml(document)},
        }
        with kube_client(kubeconfig, context) as client:
            client.apply(configmap, force=True)
        click.echo(f"wrote ConfigMap {namespace}/{name}", err=True)
        return
    cli_output.emit(document, fmt, output, table=lambda _: nodes_table(snap))


def nodes_table(snap: Any) -> str:
    rows = []
    for node in snap.nodes:
        labels = node.gpu
        count: object = labels.count if labels is not None and labels.count is not None else None
        if count is None and node.host is not None:
            count = len(node.host.gpus) or len(node.host.pci_gpus) or None
        rows.append(
            [
                node.name,
                node.gpu_product or "-",
                "-" if count is None else count,
                node.gpu_driver_version or "-",
                node.gpu_cuda_version or "-",
                node.node_info.get("osImage") or (node.host.os_release.get("PRETTY_NAME") if node.host else "") or "-",
                {True: "yes", False: "no", None: "-"}[node.ready],
                "yes" if node.host is not None else "no",
            ]
        )
    headers = ["NODE", "GPU", "COUNT", "DRIVER", "CUDA", "OS", "READY", "HOST FACTS"]
    text = cli_output.format_table(headers, rows)
    if snap.cluster is not None:
        c = snap.cluster
        text += (
            f"\nserver {c.server_version or '?'}, provider {c.provider or '?'}, "
            f"{len(c.helm_releases)} Helm releases, {len(c.workloads)} workloads\n"
        )
    return text


kubeconfig_option = click.option(
    "--kubeconfig", default=None, metavar="FILE", help="Kubeconfig (default: $KUBECONFIG, then ~/.kube/config)."
)
context_option = click.option("--context", default=None, metavar="NAME", help="Kubeconfig context.")


@click.group(invoke_without_command=True)
@kubeconfig_option
@context_option
@click.option(
    "--node-snapshot",
    "node_files",
    multiple=True,
    metavar="FILE",
    help="Merge a node snapshot (from `dsx snapshot node`) into the result; repeat for more nodes.",
)
@click.option(
    "--node-snapshots-from",
    "node_namespace",
    default=None,
    metavar="NAMESPACE",
    help="Merge the node snapshots the in-cluster agent wrote to ConfigMaps in NAMESPACE.",
)
@snapshot_format_options
@click.pass_context
def snapshot(
    ctx: click.Context,
    kubeconfig: str | None,
    context: str | None,
    node_files: tuple[str, ...],
    node_namespace: str | None,
    fmt: str,
    output: str | None,
) -> None:
    """Capture the cluster: version, provider, nodes and GPU labels, Helm releases, workloads.

    Subcommands: `node` reads what only a host knows; `merge` joins cluster and node snapshots.
    `-o cm://NAMESPACE/NAME` writes the snapshot into a ConfigMap; `--format aicr` writes NVIDIA
    AICR's snapshot document, which `aicr recipe --snapshot` reads.
    """
    if ctx.invoked_subcommand is not None:
        return
    from dsx.model import snapshot as snapshot_model

    with kube_client(kubeconfig, context) as client:
        snap = cluster_snapshot(client)
        extra = load_snapshots(node_files)
        if node_namespace:
            extra += node_snapshots_from_configmaps(client, node_namespace)
    if extra:
        snap = snapshot_model.merge([snap, *extra])
    emit_snapshot(snap, fmt, output, kubeconfig=kubeconfig, context=context)


@snapshot.command()
@click.option(
    "--root",
    default="/",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the host's / is mounted (the agent mounts it at /host).",
)
@click.option(
    "--node-name", default=None, metavar="NAME", help="Node name (default: $NODE_NAME, then ROOT/etc/hostname)."
)
@click.option(
    "--nvidia-smi-xml",
    "smi_xml",
    default=None,
    type=click.Path(dir_okay=False),
    help="Read `nvidia-smi -q -x` output from FILE instead of running nvidia-smi.",
)
@click.option(
    "--every",
    "every_seconds",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Capture again every N seconds until stopped (the DaemonSet agent); 0 captures once.",
)
@kubeconfig_option
@context_option
@snapshot_format_options
def node(
    root: str,
    node_name: str | None,
    smi_xml: str | None,
    every_seconds: int,
    kubeconfig: str | None,
    context: str | None,
    fmt: str,
    output: str | None,
) -> None:
    """Capture what only the host knows: GPUs (nvidia-smi, PCI), OS, kernel, sysctls, modules, units.

    Runs on the node (see deploy/snapshot-agent) or against a copy of a host's files (--root).
    --kubeconfig is only needed for `-o cm://NAMESPACE/NAME`.
    """
    from dsx.files import documents
    from dsx.host import snapshot as host_snapshot

    base = Path(root)
    if not base.is_dir():
        raise BadInputError(f"--root {root}: not a directory")
    name = node_name or os.environ.get("NODE_NAME") or host_snapshot.node_name_from_host(base)

    def nvidia_smi() -> str:
        if smi_xml is not None:
            return documents.read_text(smi_xml)
        return host_snapshot.run_nvidia_smi(base)

    while True:
        snap = host_snapshot.collect(
            base, node_name=name, generator=GENERATOR, nvidia_smi=nvidia_smi, captured_at=capture_time()
        )
        emit_snapshot(snap, fmt, output, kubeconfig=kubeconfig, context=context)
        if not every_seconds:
            return
        time.sleep(every_seconds)


@snapshot.command()
@click.argument("files", nargs=-1, required=True)
@snapshot_format_options
def merge(files: tuple[str, ...], fmt: str, output: str | None) -> None:
    """Join one cluster snapshot and any number of node snapshots (dsx or AICR documents) into one."""
    from dsx.model import snapshot as snapshot_model

    merged = snapshot_model.merge(load_snapshots(files))
    document, fmt = snapshot_document(merged, fmt)
    cli_output.emit(document, fmt, output, table=lambda _: nodes_table(merged))
