"""`dsx sim`: start, inspect, fault and stop a local control plane with simulated GPU nodes."""

from __future__ import annotations

from typing import Any

import click

from dsx.cli import output as cli_output

# kept here (not imported from dsx.sim) so `dsx --help` stays fast; a unit test holds them equal
ACCELERATORS = ("h100", "h200", "b200", "gb200", "a100", "l40s")
SERVICES = ("eks", "gke", "aks", "oke", "kind")
OPERATING_SYSTEMS = ("ubuntu", "al2023", "cos", "rhel")
MAX_NODES = 10_000

name_option = click.option(
    "--name", default="dsx", show_default=True, help="Cluster name (several can run side by side)."
)


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _cluster(name: str) -> Any:
    from dsx.sim.cluster import SimCluster

    return SimCluster(name)


@click.group()
def sim() -> None:
    """A local control plane with simulated GPU nodes.

    Real etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback; kwok plays
    the kubelets. See docs/sim.md for node labels, pod annotations and the fault list.
    """


@sim.command()
@name_option
@click.option("--nodes", "node_count", type=click.IntRange(1, MAX_NODES), default=8, show_default=True)
@click.option("--accelerator", type=click.Choice(ACCELERATORS), default="h100", show_default=True)
@click.option(
    "--gpus-per-node", type=click.IntRange(1, 16), default=None, help="Default: the board's count (8; 4 for gb200)."
)
@click.option("--cliques", type=click.IntRange(1, 1000), default=None, help="NVLink domains to split gb200 nodes into.")
@click.option("--service", type=click.Choice(SERVICES), default="eks", show_default=True)
@click.option("--os", "os_name", type=click.Choice(OPERATING_SYSTEMS), default="ubuntu", show_default=True)
@click.option(
    "--engine",
    is_flag=True,
    help="Also run JobSet's and Kubeflow Trainer's controllers (built once like the control plane): "
    "dsx certify's TrainJobs run for real.",
)
@click.option("--dry-run", is_flag=True, help="Print the nodes that would be created; start nothing.")
def up(
    name: str,
    node_count: int,
    accelerator: str,
    gpus_per_node: int | None,
    cliques: int | None,
    service: str,
    os_name: str,
    engine: bool,
    dry_run: bool,
) -> None:
    """Start the cluster (or converge a running one to these options) and print how to use it."""
    from dsx.sim import nodes

    options = nodes.SimOptions(node_count, accelerator, gpus_per_node, cliques, service, os_name, engine).resolved()
    cluster = _cluster(name)
    if dry_run:
        for node in nodes.layout(options):
            clique = f" clique={node.clique}" if node.clique is not None else ""
            click.echo(f"would create {node.name} rack={node.rack} block={node.block}{clique}")
        click.echo(f"would write {cluster.kubeconfig}")
        return
    status = cluster.up(options, progress=_progress)
    click.echo(f"export KUBECONFIG={status.kubeconfig}")


@sim.command()
@name_option
@click.option("--keep-state", is_flag=True, help="Stop the processes but keep the data; `up` restarts it.")
@click.option("--dry-run", is_flag=True, help="Print what would be stopped.")
def down(name: str, keep_state: bool, dry_run: bool) -> None:
    """Stop every control-plane process of the cluster and remove its state."""
    cluster = _cluster(name)
    if dry_run:
        status = cluster.status()
        for component, pid, alive in status.components:
            if alive:
                click.echo(f"would stop {component} (pid {pid})")
        if not keep_state:
            click.echo(f"would remove {cluster.state_dir}")
        return
    stopped = cluster.down(keep_state=keep_state)
    if stopped:
        _progress(f"stopped {', '.join(stopped)}")
    else:
        _progress(f"no running control plane named {name!r}")


@sim.command()
@name_option
@cli_output.format_options
def status(name: str, fmt: str, output: str | None) -> None:
    """Phase, components and node readiness of the cluster."""
    data = _cluster(name).status().to_dict()
    cli_output.emit(data, fmt, output, table=_status_table)


def _status_table(data: dict[str, Any]) -> str:
    rows: list[list[object]] = [[c["name"], c["pid"], "yes" if c["alive"] else "no"] for c in data["components"]]
    nodes = data["nodes"]
    readiness = (
        f", {nodes['ready']}/{nodes['total']} nodes Ready"
        if nodes["ready"] is not None
        else f", {nodes['total']} nodes (readiness unknown: the apiserver does not answer)"
    )
    head = (
        f"cluster {data['name']}: {data['phase']}"
        + (readiness if data["options"] else "")
        + (f", kubeconfig {data['kubeconfig']}" if data["kubeconfig"] else "")
        + "\n"
    )
    return head + (cli_output.format_table(["component", "pid", "alive"], rows) if rows else "")


@sim.command("list")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "yaml", "json"), case_sensitive=False),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None, help="Write to FILE.")
def list_clusters(fmt: str, output: str | None) -> None:
    """Every simulated cluster on this machine: name, phase, nodes, accelerator, kubeconfig."""
    from dsx.sim import cluster

    data = {"clusters": [_cluster(name).status().to_dict() for name in cluster.cluster_names()]}
    cli_output.emit(data, fmt, output, table=_list_table)


def _list_table(data: dict[str, Any]) -> str:
    if not data["clusters"]:
        return "no simulated clusters; start one with `dsx sim up`\n"
    rows: list[list[object]] = []
    for c in data["clusters"]:
        options = c["options"] or {}
        nodes = c["nodes"]
        ready = f"{nodes['ready']}/{nodes['total']}" if nodes["ready"] is not None else f"?/{nodes['total']}"
        rows.append([c["name"], c["phase"], ready, options.get("accelerator", "-"), c["kubeconfig"] or "-"])
    return cli_output.format_table(["name", "phase", "ready nodes", "accelerator", "kubeconfig"], rows)


@sim.command()
@name_option
def kubeconfig(name: str) -> None:
    """Print the path of the cluster's kubeconfig."""
    from dsx.errors import NotFoundError

    cluster = _cluster(name)
    if not cluster.kubeconfig.is_file():
        raise NotFoundError(f"no simulated cluster named {name!r}; start it with `dsx sim up --name {name}`")
    click.echo(str(cluster.kubeconfig))


@sim.command()
@name_option
@click.option("--node", required=True, help="Node name, e.g. gpu-node-00.")
@click.option(
    "--fault",
    required=True,
    help="not-ready | ready | condition:TYPE=True|False|Unknown[:REASON] | xid:CODE | sxid:CODE",
)
@click.option("--count", type=int, default=1, show_default=True, help="Kernel-log lines to append (xid, sxid).")
@click.option("--gpu", type=int, default=0, show_default=True, help="GPU index the Xid names (NVSwitch for sxid).")
@click.option("--dry-run", is_flag=True, help="Print what would be done.")
def inject(name: str, node: str, fault: str, count: int, gpu: int, dry_run: bool) -> None:
    """Inject a fault into a simulated node (see docs/sim.md for the list)."""
    from dsx.sim import faults

    result = faults.inject(_cluster(name), node, fault, count=count, gpu=gpu, dry_run=dry_run)
    prefix = "would " if dry_run else ""
    for action in result.actions:
        click.echo(f"{prefix}{action}")


@sim.command()
@name_option
@click.option("--url", required=True, help="The sentinel's base URL, e.g. http://127.0.0.1:9464.")
@click.option(
    "--token-file", required=True, type=click.Path(dir_okay=False), help="The sentinel's bearer token (one line)."
)
@click.option(
    "--events-per-node-per-second",
    "rate",
    type=click.FloatRange(0, 1000),
    default=0.1,
    show_default=True,
    help="Background health events each node's monitor posts.",
)
@click.option(
    "--faults-per-second",
    type=click.FloatRange(0, 1000),
    default=0.0,
    show_default=True,
    help="Fatal faults (Xid 79) mixed in, each on a different node.",
)
@click.option("--duration", "duration_seconds", type=click.FloatRange(0.1), default=60.0, show_default=True)
@click.option("--senders", type=click.IntRange(1, 256), default=32, show_default=True, help="Concurrent senders.")
@click.option(
    "--poll-interval",
    "poll_interval_seconds",
    type=click.FloatRange(0.05, 60),
    default=1.0,
    show_default=True,
    help="Seconds between a node monitor's posts (what it read meanwhile goes in one request).",
)
def load(
    name: str,
    url: str,
    token_file: str,
    rate: float,
    faults_per_second: float,
    duration_seconds: float,
    senders: int,
    poll_interval_seconds: float,
) -> None:
    """Post background health traffic for every node of the cluster to a sentinel, as node monitors do."""
    from dsx import serialization
    from dsx.controllers import monitors, sim_load

    token = monitors.read_token(token_file)
    plan = sim_load.LoadPlan(
        nodes=_cluster(name).status().node_names,
        events_per_node_per_second=rate,
        faults_per_second=faults_per_second,
        duration_seconds=duration_seconds,
        senders=senders,
        poll_interval_seconds=poll_interval_seconds,
    )
    report = sim_load.FleetLoad(plan, lambda: monitors.HttpSink(url, token)).run()
    click.echo(serialization.dump_yaml(report.to_dict()), nl=False)
