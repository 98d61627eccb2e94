"""One simulated cluster: a real control plane on loopback plus kwok-driven fake GPU nodes.

Everything a cluster owns lives in its state folder (`<state>/sim/<name>/`): certificates,
kubeconfig, etcd data, component logs, kwok configuration, the per-node kernel logs and the
seeded pod logs, and `state.json` with ports and process records. `up` is idempotent (a
running cluster is converged to the requested nodes; a crashed one is restarted on its old
data); `down` stops every process group and, unless asked to keep it, removes the folder.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import enum
import fcntl
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsx import atomic, errors, httpclient, retry, serialization
from dsx.files import documents
from dsx.kube.client import KubeClient
from dsx.settings import folders
from dsx.sim import binaries, kwok, nodes, pki, processes
from dsx.sim import engine as sim_engine

STATE_FILE = "state.json"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
PORTS = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", *sim_engine.PORTS)
NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
SPEC_DIGEST_ANNOTATION = "sim.dsx.run/spec-digest"
LOOPBACK = "127.0.0.1"
LOG_TAIL_LINES = 8
"""Lines of a failed component's log quoted in the error."""
NODE_READY_BUDGET_SECONDS = 0.1
"""Readiness budget added per requested node (10,000 nodes: 1,000 s more)."""
CREATE_WORKERS = 8
"""Node creations in flight at once: a 10,000-node fleet is a few hundred requests a second."""
READY_POLL_NODES_PER_SECOND = 2000
"""Readiness polls list every node; a large fleet is polled less often (10,000 nodes: every 5 s)."""

Progress = Callable[[str], None]


class Phase(enum.StrEnum):
    RUNNING = "running"
    DEGRADED = "degraded"
    STOPPED = "stopped"
    ABSENT = "absent"


@dataclass(frozen=True)
class ClusterState:
    """What `state.json` records about a cluster between commands."""

    name: str
    options: nodes.SimOptions
    kubernetes_version: str
    ports: dict[str, int]
    processes: tuple[processes.ProcessRecord, ...]
    binaries: dict[str, str]
    created: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "options": self.options.to_dict(),
            "kubernetesVersion": self.kubernetes_version,
            "ports": dict(sorted(self.ports.items())),
            "processes": [p.to_dict() for p in self.processes],
            "binaries": self.binaries,
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ClusterState:
        return cls(
            name=str(raw["name"]),
            options=nodes.SimOptions.from_dict(raw["options"]),
            kubernetes_version=str(raw["kubernetesVersion"]),
            ports={k: int(v) for k, v in raw["ports"].items()},
            processes=tuple(processes.ProcessRecord.from_dict(p) for p in raw["processes"]),
            binaries={k: str(v) for k, v in raw["binaries"].items()},
            created=str(raw["created"]),
        )


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    phase: Phase
    state_dir: Path
    kubeconfig: Path | None
    server: str | None
    kubernetes_version: str | None
    options: nodes.SimOptions | None
    components: tuple[tuple[str, int, bool], ...]
    """(component, pid, alive) per recorded process."""
    node_names: tuple[str, ...]
    nodes_ready: int | None
    """Ready nodes as the apiserver reports them; None when it could not be asked."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "phase": self.phase.value,
            "stateDir": str(self.state_dir),
            "kubeconfig": str(self.kubeconfig) if self.kubeconfig else None,
            "server": self.server,
            "kubernetesVersion": self.kubernetes_version,
            "options": self.options.to_dict() if self.options else None,
            "components": [{"name": c, "pid": pid, "alive": ok} for c, pid, ok in self.components],
            "nodes": {"total": len(self.node_names), "ready": self.nodes_ready, "names": list(self.node_names)},
        }


def cluster_names(root: Path | None = None) -> list[str]:
    """Names of the clusters with recorded state under `root` (running or stopped with --keep-state)."""
    base = root if root is not None else folders.paths().sim_dir
    if not base.is_dir():
        return []
    return sorted(d.name for d in base.iterdir() if (d / STATE_FILE).is_file())


def _free_ports(names: tuple[str, ...]) -> dict[str, int]:
    """Distinct free loopback ports (sockets held open together so no two are the same)."""
    with contextlib.ExitStack() as stack:
        ports = {}
        for name in names:
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOOPBACK, 0))
            ports[name] = int(sock.getsockname()[1])
        return ports


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


# clients of the apiserver first, then the apiserver, then its storage: an apiserver whose
# etcd is already gone takes its full grace period to stop
STOP_ORDER = (("kwok", "kube-scheduler", "kube-controller-manager"), ("kube-apiserver",), ("etcd",))


def _stop_in_order(records: tuple[processes.ProcessRecord, ...]) -> None:
    for group in STOP_ORDER:
        processes.stop([r for r in records if r.component in group])
    processes.stop([r for r in records if not any(r.component in group for group in STOP_ORDER)])


def _log_evidence(log: Path) -> str:
    """Where a component's log is and how it ends, for an error message that must stand on its own."""
    tail = processes.log_tail(log, lines=LOG_TAIL_LINES)
    return f"log {log}, last lines: {tail}" if tail else f"log {log} (empty)"


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions") or []
    )


class SimCluster:
    """A named simulated cluster under a state root (default: `dsx.folders.paths().sim_dir`)."""

    def __init__(self, name: str = "dsx", *, root: Path | None = None) -> None:
        if not NAME_PATTERN.match(name):
            raise errors.BadInputError(
                f"dsx sim: name: {name!r} is not allowed; use 1-32 lowercase letters, digits and '-', "
                "starting and ending with a letter or digit"
            )
        self.name = name
        self.root = root if root is not None else folders.paths().sim_dir
        self.state_dir = self.root / name

    # ---- layout of the state folder --------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    @property
    def pod_logs_dir(self) -> Path:
        return self.state_dir / "pod-logs"

    def kernel_log(self, node_name: str) -> Path:
        """The simulated kernel log of a node (what `dmesg`/`journalctl -k` would show there)."""
        return self.state_dir / "nodes" / node_name / "kern.log"

    def load_state(self) -> ClusterState | None:
        if not self.state_file.is_file():
            return None
        try:
            return ClusterState.from_dict(documents.load_mapping_file(self.state_file))
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.BadInputError(f"{self.state_file}: unreadable simulator state ({exc})") from exc

    def _save(self, state: ClusterState) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_file(self.state_file, serialization.dump_json(state.to_dict()))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One `up` or `down` at a time per cluster, across processes."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{self.name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def client(self) -> KubeClient:
        if not self.kubeconfig.is_file():
            raise errors.NotFoundError(f"no simulated cluster named {self.name!r} (no {self.kubeconfig})")
        return KubeClient(self.kubeconfig)

    # ---- up ---------------------------------------------------------------------------------

    def up(
        self,
        options: nodes.SimOptions,
        *,
        progress: Progress = lambda _: None,
        die_with_parent: bool = False,
        ready_timeout_seconds: float = 180.0,
        allow_build: bool = True,
    ) -> ClusterStatus:
        """Start (or converge) the cluster; returns once every node is Ready and pods can be scheduled.

        `die_with_parent` ties the components to the calling process (test sessions use it, so a
        killed test run leaves no control plane behind); the CLI leaves them running.
        """
        options = options.resolved()
        began = time.monotonic()
        # creating and readying nodes takes time in proportion to the fleet (tens of ms a node on 2 busy cores)
        ready_timeout_seconds += options.nodes * NODE_READY_BUDGET_SECONDS

        def say(message: str) -> None:
            progress(f"[{time.monotonic() - began:5.1f}s] {message}")

        with self._locked():
            state = self.load_state()
            retune = state is not None and kwok.fleet_tuning(state.options.nodes) != kwok.fleet_tuning(options.nodes)
            engine_changed = state is not None and state.options.engine != options.engine
            if state is not None and self._all_alive(state) and not retune and not engine_changed:
                say(f"control plane {self.name!r} already running; converging nodes")
                state = dataclasses.replace(state, options=options)
                self._save(state)
                deadline = time.monotonic() + ready_timeout_seconds
                with self.client() as kube:
                    self._converge_nodes(kube, state, say)
                    self._wait_ready(kube, state, deadline, say)
                return self.status()
            if state is not None:
                say(
                    "restarting the control plane with the lease settings of this fleet size (docs/sim.md)"
                    if retune
                    else "restarting the control plane with the certification engine "
                    + ("on" if options.engine else "off")
                    if engine_changed
                    else "restarting a stopped control plane on its existing data"
                )
                _stop_in_order(state.processes)
            processes.kill_pids(processes.strays(f"{self.state_dir}/"))
            found = binaries.resolve(progress=say, allow_build=allow_build)
            engine_files = binaries.resolve_engine(progress=say, allow_build=allow_build) if options.engine else None
            # the readiness budget is for the processes: a first-run build may take many minutes
            deadline = time.monotonic() + ready_timeout_seconds
            state = self._start(options, found, state, deadline, say, die_with_parent, engine_files)
        say(f"ready: {options.nodes} {options.accelerator} nodes")
        return self.status()

    def _start(
        self,
        options: nodes.SimOptions,
        found: binaries.Binaries,
        previous: ClusterState | None,
        deadline: float,
        say: Progress,
        die_with_parent: bool,
        engine_files: binaries.Engine | None = None,
    ) -> ClusterState:
        for folder in ("logs", "nodes", "pod-logs"):
            (self.state_dir / folder).mkdir(parents=True, exist_ok=True)
        certs = pki.ensure(self.state_dir / "pki")
        ports = _free_ports(PORTS)
        self._write_kubeconfig(certs, ports["kube-apiserver"])
        empty_log = self.pod_logs_dir / "unseeded.log"
        empty_log.touch()
        kwok_config = self.state_dir / "kwok.yaml"
        tuning = kwok.fleet_tuning(options.nodes)
        kwok_config.write_text(kwok.configuration(empty_log=empty_log, tuning=tuning), encoding="utf-8")
        state = ClusterState(
            name=self.name,
            options=options,
            kubernetes_version=found.kubernetes_version,
            ports=ports,
            processes=(),
            binaries=found.to_dict(),
            created=previous.created
            if previous
            else datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

        def launch(component: str) -> None:
            nonlocal state
            extra: dict[str, str] = {}
            if component in sim_engine.COMPONENTS:
                assert engine_files is not None
                argv = sim_engine.argv(component, engine_files, self.state_dir, self.kubeconfig)
                extra = sim_engine.environment(component, self.state_dir)
            else:
                argv = self._argv(component, found, certs, ports, tuning)
            record = processes.start(
                component,
                argv,
                self.state_dir / "logs" / f"{component}.log",
                die_with_parent=die_with_parent,
                extra_env=extra,
            )
            state = dataclasses.replace(state, processes=(*state.processes, record))
            self._save(state)

        try:
            say(f"starting etcd and Kubernetes {found.kubernetes_version} on 127.0.0.1:{ports['kube-apiserver']}")
            for component in COMPONENTS[:-1]:
                launch(component)
            with self.client() as kube:
                self._wait(lambda: kube.ready(), state, deadline, "kube-apiserver", "/readyz")
                say("apiserver ready")
                kube.create_crd(kwok.LOGS_CRD)
                launch("kwok")
                self._converge_nodes(kube, state, say)
                self._wait_ready(kube, state, deadline, say)
                if engine_files is not None:
                    self._start_engine(kube, engine_files, certs, ports, state, deadline, launch, say)
        except BaseException:
            _stop_in_order(state.processes)
            raise
        return state

    def _start_engine(
        self,
        kube: KubeClient,
        files: binaries.Engine,
        certs: pki.Pki,
        ports: dict[str, int],
        state: ClusterState,
        deadline: float,
        launch: Callable[[str], None],
        say: Progress,
    ) -> None:
        """JobSet and Trainer: CRDs, the controllers on loopback, then their webhooks pointed at them."""
        say(f"certification engine: JobSet and Kubeflow Trainer controllers ({files.jobset.parent})")
        sim_engine.prepare(self.state_dir, certs, ports)
        crds = sim_engine.install_crds(kube, files)
        for component in sim_engine.COMPONENTS:
            launch(component)
        current = self.load_state() or state
        self._wait(sim_engine.ready(ports), current, deadline, "trainer-controller-manager", "/readyz")
        for config in sim_engine.webhook_configurations(files, certs.ca_cert, ports):
            kube.apply(config, force=True)
        say(f"certification engine ready ({len(crds)} CRDs, webhooks on 127.0.0.1)")

    def _argv(
        self,
        component: str,
        found: binaries.Binaries,
        certs: pki.Pki,
        ports: dict[str, int],
        tuning: kwok.FleetTuning,
    ) -> list[str]:
        kubeconfig = str(self.kubeconfig)
        etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
        peer_url = f"http://{LOOPBACK}:{ports['etcd-peer']}"
        if component == "etcd":
            return [
                str(found["etcd"]),
                "--name=dsx-sim",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=dsx-sim={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ]
        if component == "kube-apiserver":
            return [
                str(found["kube-apiserver"]),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={ports['kube-apiserver']}",
                f"--tls-cert-file={certs.apiserver_cert}",
                f"--tls-private-key-file={certs.apiserver_key}",
                f"--client-ca-file={certs.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={certs.service_account_public_key}",
                f"--service-account-signing-key-file={certs.service_account_key}",
                f"--service-cluster-ip-range={pki.SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--kubelet-certificate-authority={certs.ca_cert}",
                f"--kubelet-client-certificate={certs.admin_cert}",
                f"--kubelet-client-key={certs.admin_key}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                # small fleets: watches are served from etcd, so a compaction yields a real 410 Gone
                # to clients that resume from an old resourceVersion (as a busy cache window does);
                # large fleets use the cache (kwok.FleetTuning.watch_cache)
                f"--watch-cache={'true' if tuning.watch_cache else 'false'}",
                "--profiling=false",
            ]
        if component == "kube-controller-manager":
            grace = tuning.node_monitor_grace_seconds
            return [
                str(found["kube-controller-manager"]),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={ports['kube-controller-manager']}",
                "--leader-elect=false",
                f"--cluster-name={self.name}",
                f"--root-ca-file={certs.ca_cert}",
                f"--service-account-private-key-file={certs.service_account_key}",
                # node lifecycle: NotReady taints after the default 50 s grace; pods are
                # evicted only after their not-ready toleration (300 s by default)
                "--controllers=*",
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                *([f"--node-monitor-grace-period={grace}s"] if grace else []),
                "--profiling=false",
            ]
        if component == "kube-scheduler":
            return [
                str(found["kube-scheduler"]),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={ports['kube-scheduler']}",
                "--leader-elect=false",
                "--profiling=false",
            ]
        if component == "kwok":
            return [
                str(found["kwok"]),
                f"--kubeconfig={kubeconfig}",
                f"--config={self.state_dir / 'kwok.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={nodes.NODE_ANNOTATION}=fake",
                f"--node-ip={LOOPBACK}",
                f"--node-port={ports['kwok']}",
                f"--server-address={LOOPBACK}:{ports['kwok']}",
                f"--tls-cert-file={certs.kwok_cert}",
                f"--tls-private-key-file={certs.kwok_key}",
                f"--node-lease-duration-seconds={tuning.lease_seconds}",
                "--enable-crds=Logs",
            ]
        raise errors.InternalError(f"unknown control-plane component {component!r}")

    def _write_kubeconfig(self, certs: pki.Pki, port: int) -> None:
        import base64

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        context = f"dsx-sim-{self.name}"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context,
                    "cluster": {
                        "server": f"https://{LOOPBACK}:{port}",
                        "certificate-authority-data": b64(certs.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": f"{context}-admin",
                    "user": {
                        "client-certificate-data": b64(certs.admin_cert),
                        "client-key-data": b64(certs.admin_key),
                    },
                }
            ],
            "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin"}}],
            "current-context": context,
            "preferences": {},
        }
        atomic.write_file(self.kubeconfig, serialization.dump_yaml(config), mode=0o600)

    # ---- nodes and readiness ----------------------------------------------------------------

    def _converge_nodes(self, kube: KubeClient, state: ClusterState, say: Progress) -> None:
        """Create the nodes the options ask for, replace changed ones, delete the rest."""
        desired = nodes.layout(state.options)
        existing = {
            n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(SPEC_DIGEST_ANNOTATION)
            for n in kube.list_nodes({nodes.CLUSTER_LABEL: self.name})
        }
        created = replaced = 0

        def converge(node: nodes.SimNode) -> bool | None:
            """Create (True), replace (False) or leave (None) one node."""
            log = self.kernel_log(node.name)
            log.parent.mkdir(parents=True, exist_ok=True)
            log.touch()
            manifest = nodes.node_manifest(
                self.name, state.options, node, kubelet_version=state.kubernetes_version, kernel_log=log
            )
            digest = serialization.digest(manifest)
            manifest["metadata"]["annotations"][SPEC_DIGEST_ANNOTATION] = digest
            fresh = node.name not in existing
            if not fresh:
                if existing[node.name] == digest:
                    return None
                kube.delete("v1", "Node", node.name)
            kube.create(manifest)
            return fresh

        with concurrent.futures.ThreadPoolExecutor(CREATE_WORKERS, thread_name_prefix="sim-nodes") as pool:
            for outcome in pool.map(converge, desired):
                created += outcome is not None
                replaced += outcome is False
        wanted = {n.name for n in desired}
        surplus = sorted(set(existing) - wanted)
        for name in surplus:
            kube.delete("v1", "Node", name)
        if created or surplus:
            say(f"nodes: {created - replaced} created, {replaced} replaced, {len(surplus)} removed")

    def _wait_ready(self, kube: KubeClient, state: ClusterState, deadline: float, say: Progress) -> None:
        want = state.options.nodes

        def nodes_ready() -> bool:
            return sum(_ready(n) for n in kube.list_nodes({nodes.CLUSTER_LABEL: self.name})) == want

        interval = max(0.2, want / READY_POLL_NODES_PER_SECOND)
        self._wait(nodes_ready, state, deadline, "kwok", f"{want} Ready nodes", interval_seconds=interval)
        say(f"{want} nodes Ready")

        def service_account() -> bool:
            try:
                kube.get("v1", "ServiceAccount", "default", "default")
            except errors.NotFoundError:
                return False
            return True

        self._wait(service_account, state, deadline, "kube-controller-manager", "the default service account")
        self._wait(
            lambda: _port_open(state.ports["kube-scheduler"]), state, deadline, "kube-scheduler", "its secure port"
        )

    def _wait(
        self,
        check: Callable[[], bool],
        state: ClusterState,
        deadline: float,
        component: str,
        what: str,
        *,
        interval_seconds: float = 0.2,
    ) -> None:
        """Poll `check` until it holds; a component that exits, or the deadline, fails with its log's tail.

        `component` is the one whose readiness `check` reflects, so a timeout names it and shows its log.
        """
        for _ in retry.attempts(timeout_seconds=deadline - time.monotonic(), backoff=retry.Backoff(interval_seconds)):
            for record in state.processes:
                if not processes.alive(record):
                    raise errors.UnavailableError(
                        f"dsx sim: {record.component} {processes.exit_description(record)} while waiting for "
                        f"{component} {what}; {_log_evidence(Path(record.log))}"
                    )
            with contextlib.suppress(errors.UnavailableError, errors.DeadlineExceededError):
                if check():
                    return
        log = self.state_dir / "logs" / f"{component}.log"
        raise errors.DeadlineExceededError(f"dsx sim: timed out waiting for {component} {what}; {_log_evidence(log)}")

    def _all_alive(self, state: ClusterState) -> bool:
        started = {p.component for p in state.processes}
        wanted = {*COMPONENTS, *(sim_engine.COMPONENTS if state.options.engine else ())}
        return started == wanted and all(processes.alive(p) for p in state.processes)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now (the apiserver does this every 5 minutes).

        A watcher that resumes from an older resourceVersion then gets a real 410 Gone; tests of
        watch recovery use this. Returns the revision compacted to.
        """
        import base64

        state = self.load_state()
        if state is None or not self._all_alive(state):
            raise errors.UnavailableError(f"dsx sim: cluster {self.name!r} is not running")
        base = f"http://{LOOPBACK}:{state.ports['etcd']}/v3/kv"

        def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            try:
                response = httpclient.request("POST", f"{base}/{path}", json_body=body, timeout_seconds=10)
            except httpclient.TransportError as exc:
                raise errors.UnavailableError(f"dsx sim: etcd {exc}") from exc
            if not response.ok:
                raise errors.UnavailableError(f"dsx sim: etcd {path}: {response.status}: {response.text(500)}")
            answer: dict[str, Any] = response.json()
            return answer

        revision = int(
            call("range", {"key": base64.b64encode(b"/registry/").decode(), "limit": 1})["header"]["revision"]
        )
        call("compaction", {"revision": revision, "physical": True})
        return revision

    # ---- down and status --------------------------------------------------------------------

    def down(self, *, keep_state: bool = False) -> list[str]:
        """Stop every component (whole process groups, SIGKILL after 10 s); returns what was running."""
        with self._locked():
            state = self.load_state()
            records = state.processes if state else ()
            running = [r.component for r in records if processes.alive(r)]
            _stop_in_order(records)
            processes.kill_pids(processes.strays(f"{self.state_dir}/"))
            if keep_state:
                if state is not None:
                    self._save(state)
            elif self.state_dir.exists():
                shutil.rmtree(self.state_dir)
        return running

    def status(self) -> ClusterStatus:
        state = self.load_state()
        if state is None:
            return ClusterStatus(self.name, Phase.ABSENT, self.state_dir, None, None, None, None, (), (), None)
        components = tuple((p.component, p.pid, processes.alive(p)) for p in state.processes)
        alive = [ok for _, _, ok in components]
        if alive and all(alive) and len(alive) == len(COMPONENTS):
            phase = Phase.RUNNING
        elif any(alive):
            phase = Phase.DEGRADED
        else:
            phase = Phase.STOPPED
        names = tuple(n.name for n in nodes.layout(state.options))
        ready: int | None = None
        if phase is not Phase.STOPPED:
            try:
                with self.client() as kube:
                    ready = sum(_ready(n) for n in kube.list_nodes({nodes.CLUSTER_LABEL: self.name}))
            except errors.DsxError:
                ready = None
        return ClusterStatus(
            name=self.name,
            phase=phase,
            state_dir=self.state_dir,
            kubeconfig=self.kubeconfig,
            server=f"https://{LOOPBACK}:{state.ports['kube-apiserver']}",
            kubernetes_version=state.kubernetes_version,
            options=state.options,
            components=components,
            node_names=names,
            nodes_ready=ready,
        )
