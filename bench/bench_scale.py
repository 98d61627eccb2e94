"""The sentinel at fleet size: memory, fault-to-cordon, mass cordon and throughput at 1,000 to 10,000 nodes.

One `dsx sim` cluster (real etcd, kube-apiserver, controller manager, scheduler and kwok; leases
tuned by `dsx.sim.kwok.fleet_tuning`) grows 1,000 → 5,000 → 10,000 nodes. At each size and for
each store (SQLite file, PostgreSQL server with fsync on), a fresh `dsx sentinel run` process
(quarantine acting, analyzer on, node policies on, breaker at 50% so 5% does not trip) serves
the fleet, and `dsx.controllers.sim_load` posts 0.1 health events per node per second to its
/v1/events, one request per node per poll, from 32 senders, as the node monitors would. Then:

- memory: the sentinel's VmRSS (and peak VmHWM) from /proc, plus the store's size on disk
  (SQLite files; PostgreSQL relation sizes); per node = (RSS + store) / nodes. Target ≤ 0.2 MB.
- CPU seconds of the sentinel per 1,000 background events (utime+stime over a quiet window).
- fault-to-cordon under that load: one Xid 79 at a time on an untouched node, from the post to
  the moment this process's own node watch sees `spec.unschedulable` (watch delivery included).
  p50 / p99 / max. Target p99 < 100 ms at 10,000 nodes.
- mass cordon: 5% of the fleet fails at once (≤ 1,000 events a request); nodes/s from the first
  post to the last cordon seen. Target ≥ 200 nodes/s.
- ingest (events/s, batches of 1,000, into a fresh store of this kind) and the analyzer as a
  store consumer, with bench/bench_store.py's event mix spread over this fleet. Targets:
  SQLite ≥ 20,000, PostgreSQL ≥ 10,000 ingest; analyzer ≥ 5,000 events/s.
- node-watch memory: bytes per node of a watch's view holding whole Nodes vs the sentinel's
  slimmed ones (`kube_nodes.slim_node`), measured with tracemalloc in this process.

The load average is recorded beside every figure (the reference machine is shared). Results go
to bench/results/scale.json and scale.html (latency and memory against fleet size).

Run: python bench/run.py scale            (full matrix, < 30 min on 2 cores)
     python bench/run.py scale --quick    (1,000 nodes, SQLite, < 5 min)
     options: --sizes=1000,5000 --stores=sqlite,postgresql --out=DIR
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # the PostgreSQL launcher the test suite uses
sys.path.insert(0, str(HERE))  # bench_store: one home for the event mix, ingest and analyzer drains

import psycopg  # noqa: E402

import bench_store  # noqa: E402
from dsx import errors, serialization  # noqa: E402
from dsx.controllers import kube_nodes, monitors, sim_load  # noqa: E402
from dsx.health.decisions import analyzer  # noqa: E402
from dsx.health.decisions import policy as policy_module  # noqa: E402
from dsx.kube.client import KubeClient  # noqa: E402
from dsx.kube.watch import ResourceWatch  # noqa: E402
from dsx.model.health import HealthEvent, ProcessingStrategy  # noqa: E402
from dsx.pipeline import analyzer_stage  # noqa: E402
from dsx.sim import binaries, kwok  # noqa: E402
from dsx.sim.cluster import SimCluster  # noqa: E402
from dsx.sim.nodes import CLUSTER_LABEL, SimOptions  # noqa: E402
from dsx.store import open_store  # noqa: E402
from fixtures.postgres_server import fresh_schema_url, running_postgres  # noqa: E402

SIZES = (1000, 5000, 10_000)
STORES = ("sqlite", "postgresql")
CLUSTER = "bench-scale"
TOKEN = "bench-scale-token-0123456789abcdef"
RATE = 0.1
SENDERS = 32
WARMUP_SECONDS = 5.0
IDLE_WINDOW_SECONDS = 5.0
QUIET_WINDOW_SECONDS = 10.0
SAMPLE_TIMEOUT_SECONDS = 30.0
SERIES_SECONDS = 60.0
MASS_TIMEOUT_SECONDS = 120.0
LATENCY_SAMPLES = 40
MASS_FRACTION = 0.05
THROUGHPUT_EVENTS = 10_000
FLOOD_SENDERS = 4
FLOOD_BATCH = 1000
FLOOD_WARMUP_SECONDS = 5.0
FLOOD_SAMPLES = 5
FLOOD_TARGET_MS = 1000.0
TARGETS = {
    "memory_mb_per_node": 0.2,
    "fault_to_cordon_p99_ms": 100.0,
    "flood_fault_to_cordon_max_ms": FLOOD_TARGET_MS,
    "cordon_nodes_per_second": 200.0,
    "analyzer_events_per_second": 5000.0,
    "ingest_events_per_second": {"sqlite": 20_000.0, "postgresql": 10_000.0},
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


class CordonWatch:
    """This process's own node watch: when each node was first seen cordoned (monotonic)."""

    def __init__(self, client: KubeClient) -> None:
        self.watch: ResourceWatch = client.watch_nodes({CLUSTER_LABEL: CLUSTER}, keep=kube_nodes.slim_node)
        self.cordoned: dict[str, float] = {}
        self.changed = threading.Condition()
        self.stop = threading.Event()
        for node in self.watch.sync():
            if (node.get("spec") or {}).get("unschedulable"):
                self.cordoned[node["metadata"]["name"]] = 0.0
        self.thread = threading.Thread(target=self._run, name="cordon-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for change in self.watch.events(timeout_seconds=1.0):
                if (change.object.get("spec") or {}).get("unschedulable"):
                    seen = time.monotonic()
                    with self.changed:
                        self.cordoned.setdefault(change.name, seen)
                        self.changed.notify_all()

    def wait_for(self, names: list[str], timeout_seconds: float, *, partial: bool = False) -> float:
        """The monotonic time the last of `names` was seen cordoned (`partial`: of those that were, by the deadline)."""
        with self.changed:
            if not self.changed.wait_for(lambda: all(n in self.cordoned for n in names), timeout=timeout_seconds):
                missing = [n for n in names if n not in self.cordoned]
                if not partial or len(missing) == len(names):
                    raise RuntimeError(f"{len(missing)} of {len(names)} nodes not cordoned in {timeout_seconds:.0f} s")
            return max(self.cordoned[n] for n in names if n in self.cordoned)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def policy_file(folder: Path) -> Path:
    document = {
        "apiVersion": policy_module.API_VERSION,
        "kind": policy_module.KIND,
        "stages": {"quarantine": {"enabled": True}, "analyzer": {"enabled": True}},
        "gpuNodeSelector": {CLUSTER_LABEL: CLUSTER},
        "breaker": {"enabled": True, "maxQuarantinedPercent": 50.0},
        "monitors": {"kubeObjects": True},
    }
    policy_module.from_dict(document, source="bench")  # refuse a bad document here, not in the child
    path = folder / "policy.yaml"
    path.write_text(serialization.dump_yaml(document), encoding="utf-8")
    return path


@contextmanager
def sentinel_process(folder: Path, kubeconfig: Path, store_url: str, label: str) -> Iterator[tuple[int, str]]:
    port = free_port()
    argv = [
        sys.executable, "-m", "dsx", "sentinel", "run",
        "--kubeconfig", str(kubeconfig), "--config", str(policy_file(folder)), "--store", store_url,
        "--port", str(port), "--state-dir", str(folder / f"{label}-state"), "--owner", f"bench-{label}",
        "--log-level", "warning", "--workers", "32",
    ]  # fmt: skip
    env = {**os.environ, "DSX_SENTINEL_TOKENS": TOKEN, "PYTHONPATH": str(ROOT / "src")}
    log = (folder / f"{label}-sentinel.log").open("wb")
    process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"sentinel exited {process.returncode}; log {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sentinel not ready in 300 s; log {log.name}")
            time.sleep(0.5)
        yield process.pid, url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def store_bytes(store: str, url: str, path: Path) -> int:
    if store == "sqlite":
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
        ).fetchone()
    return int(row[0]) if row else 0


def untouched(fleet: list[str], used: set[str], count: int) -> list[str]:
    picked = [n for n in fleet if n not in used][:count]
    if len(picked) < count:
        raise RuntimeError(f"only {len(picked)} untouched nodes left; wanted {count}")
    used.update(picked)
    return picked


KUBECTL_PROCESSES = 16


def kubectl_cordon(kubectl: Path, kubeconfig: Path, names: list[str], watcher: CordonWatch) -> dict[str, Any]:
    """The reference for mass cordon: `kubectl cordon` of as many nodes, on the same sim in the same
    minute, timed the same way (from the start to the last cordon this process's watch sees). One
    kubectl cordons its names one after the other under client-go's default client-side limit (5
    requests/s, a GET and a PATCH a node), so the names are split over `KUBECTL_PROCESSES` concurrent
    processes, as `xargs -P 16 kubectl cordon` would run them."""
    started = time.monotonic()
    slices = [names[i::KUBECTL_PROCESSES] for i in range(KUBECTL_PROCESSES) if names[i::KUBECTL_PROCESSES]]
    processes = [
        subprocess.Popen(
            [str(kubectl), "--kubeconfig", str(kubeconfig), "cordon", *part],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for part in slices
    ]
    deadline = started + MASS_TIMEOUT_SECONDS
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    try:
        done = watcher.wait_for(names, max(0.1, deadline - time.monotonic()), partial=True)
    except RuntimeError:
        done = time.monotonic()
    cordoned = sum(1 for n in names if n in watcher.cordoned)
    return {
        "nodes": len(names),
        "cordoned": cordoned,
        "processes": len(slices),
        "seconds": round(done - started, 2),
        "nodes_per_second": round(cordoned / (done - started), 1),
        "load_average": load_average(),
    }


def routine_events(fleet: list[str], start: int, count: int) -> list[HealthEvent]:
    """STORE_ONLY traffic (a monitor's informational records): stored, never a reason to act."""
    now = datetime.now(UTC)
    return [
        dataclasses.replace(
            sim_load.healthy_event(fleet[(start + i) % len(fleet)], i % 8, now),
            processing_strategy=ProcessingStrategy.STORE_ONLY,
            message=f"routine record {start + i}",
        )
        for i in range(count)
    ]


def flood_sender(argv: list[str]) -> None:
    """One flood sender, its own process (`--flood-sender URL INDEX FLEET_FILE`): STORE_ONLY batches
    of `FLOOD_BATCH` as fast as the sentinel takes them, until SIGTERM; prints its counts as JSON.

    A process, not a thread of this one: the senders are other machines in a fleet, and as threads
    here they held this process's interpreter lock, so the node watch that times each cordon saw it
    late by as much as the sentinel took."""
    url, index, fleet_file = argv[0], int(argv[1]), Path(argv[2])
    fleet = json.loads(fleet_file.read_text())
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _frame: stopping.append(number))
    sink = monitors.HttpSink(url, TOKEN, timeout_seconds=MASS_TIMEOUT_SECONDS)
    accepted, problems, start = 0, [], index * 10_000_000
    while not stopping:
        batch = routine_events(fleet, start, FLOOD_BATCH)
        start += FLOOD_BATCH
        try:
            sink.send(batch)
        except errors.DsxError as exc:
            problems.append(exc.message)
            time.sleep(0.5)
            continue
        accepted += len(batch)
    sink.close()
    print(json.dumps({"accepted": accepted, "errors": len(problems), "first_error": problems[0] if problems else ""}))


def flood(url: str, store_url: str, fleet: list[str], used: set[str], watcher: CordonWatch) -> dict[str, Any]:
    """Fatal Xids posted while `FLOOD_SENDERS` sender processes post STORE_ONLY batches of `FLOOD_BATCH` as
    fast as the sentinel takes them: each fault's post-to-cordon time, split into the post's answer, the
    sentinel's acknowledgement of its cordon (the quarantine stage record: after the PATCH returned) and
    this process's watch seeing it; and how many routine events were stored ahead of it and not yet seen
    by the quarantine stage when it was posted (its backlog)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(fleet, handle)
    fleet_file = Path(handle.name)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    senders = [
        subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--flood-sender", url, str(i), str(fleet_file)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(FLOOD_SENDERS)
    ]
    reader = open_store(store_url)
    began = time.monotonic()
    samples: list[float] = []
    stored: list[float] = []
    acked: list[float] = []
    backlogs: list[int] = []
    missed = 0
    try:
        time.sleep(FLOOD_WARMUP_SECONDS)
        sink = monitors.HttpSink(url, TOKEN, timeout_seconds=SAMPLE_TIMEOUT_SECONDS)
        for node in untouched(fleet, used, FLOOD_SAMPLES):
            backlogs.append(reader.last_sequence() - reader.cursor("quarantine"))
            fault = sim_load.fault_event(node, datetime.now(UTC))
            posted, posted_wall = time.monotonic(), time.time()
            try:
                sink.send([fault])
                stored.append(time.monotonic() - posted)
                samples.append(watcher.wait_for([node], SAMPLE_TIMEOUT_SECONDS) - posted)
            except (RuntimeError, errors.DsxError):
                missed += 1
                continue
            found = reader.find(fault.idempotency_key)
            record = reader.stage_record("quarantine", found.sequence) if found else None
            if record is not None:
                acked.append(record.updated_at.timestamp() - posted_wall)
            time.sleep(0.5)
        sink.close()
    finally:
        for process in senders:
            process.send_signal(signal.SIGTERM)
        counts = [json.loads(process.communicate(timeout=MASS_TIMEOUT_SECONDS)[0] or "{}") for process in senders]
        elapsed = time.monotonic() - began
        reader.close()
        fleet_file.unlink()
    problems = [c["first_error"] for c in counts if c.get("errors")]
    return {
        "senders": FLOOD_SENDERS,
        "sender_processes": True,
        "batch": FLOOD_BATCH,
        "routine_events_per_second": round(sum(c.get("accepted", 0) for c in counts) / elapsed, 1),
        "errors": sum(c.get("errors", 0) for c in counts),
        "first_error": problems[0] if problems else "",
        "samples": len(samples),
        "missed": missed,
        "quarantine_backlog_events_median": sorted(backlogs)[len(backlogs) // 2] if backlogs else None,
        "post_answered_p50_ms": round(percentile(stored, 0.50) * 1e3, 1) if stored else None,
        "post_answered_max_ms": round(max(stored) * 1e3, 1) if stored else None,
        "cordon_acknowledged_p50_ms": round(percentile(acked, 0.50) * 1e3, 1) if acked else None,
        "cordon_acknowledged_max_ms": round(max(acked) * 1e3, 1) if acked else None,
        "fault_to_cordon_p50_ms": round(percentile(samples, 0.50) * 1e3, 1) if samples else None,
        "fault_to_cordon_max_ms": round(max(samples) * 1e3, 1) if samples else None,
        "load_average": load_average(),
    }


def sentinel_round(
    folder: Path,
    kubeconfig: Path,
    store: str,
    store_url: str,
    db_path: Path,
    fleet: list[str],
    used: set[str],
    kubectl: Path,
) -> dict[str, Any]:
    size = len(fleet)
    label = f"{size}-{store}"
    figures: dict[str, Any] = {"nodes": size, "store": store}
    with (
        KubeClient(kubeconfig) as client,
        sentinel_process(folder, kubeconfig, store_url, label) as (pid, url),
    ):
        watcher = CordonWatch(client)
        stop = threading.Event()
        plan = sim_load.LoadPlan(
            nodes=tuple(fleet), events_per_node_per_second=RATE, duration_seconds=3600, senders=SENDERS
        )
        load = sim_load.FleetLoad(plan, lambda: monitors.HttpSink(url, TOKEN), stop=stop)
        runner = threading.Thread(target=load.run, name="fleet-load", daemon=True)
        idle = proc_status(pid)
        idle_cpu0 = cpu_seconds(pid)
        time.sleep(IDLE_WINDOW_SECONDS)
        idle_cpu = (cpu_seconds(pid) - idle_cpu0) / IDLE_WINDOW_SECONDS
        runner.start()
        try:
            time.sleep(WARMUP_SECONDS)
            cpu0, events0, t0 = cpu_seconds(pid), load.report.events, time.monotonic()
            time.sleep(QUIET_WINDOW_SECONDS)
            cpu1, events1, t1 = cpu_seconds(pid), load.report.events, time.monotonic()
            sent = events1 - events0
            figures["background"] = {
                "offered_events_per_second": round(size * RATE, 1),
                "posted_events_per_second": round(sent / (t1 - t0), 1),
                "cpu_seconds_per_1000_events": round((cpu1 - cpu0) / max(sent, 1) * 1000, 3),
                "sentinel_cpu_percent": round((cpu1 - cpu0) / (t1 - t0) * 100, 1),
                "sentinel_idle_cpu_percent": round(idle_cpu * 100, 1),
                "load_average": load_average(),
            }
            sink = monitors.HttpSink(url, TOKEN, timeout_seconds=SAMPLE_TIMEOUT_SECONDS)
            samples: list[float] = []
            missed = 0
            series_ends = time.monotonic() + SERIES_SECONDS
            for node in untouched(fleet, used, LATENCY_SAMPLES):
                if time.monotonic() > series_ends:
                    break  # a slow pipeline yields fewer samples, not a longer run (the count is recorded)
                posted = time.monotonic()
                try:
                    sink.send([sim_load.fault_event(node, datetime.now(UTC))])
                    samples.append(watcher.wait_for([node], SAMPLE_TIMEOUT_SECONDS) - posted)
                except (RuntimeError, errors.DsxError):
                    missed += 1  # a sample that never came is a miss, recorded; three end the series
                    if missed >= 3:
                        break
                time.sleep(0.1)
            figures["fault_to_cordon_ms"] = {
                "samples": len(samples),
                "missed": missed,
                "p50": round(percentile(samples, 0.50) * 1e3, 1) if samples else None,
                "p99": round(percentile(samples, 0.99) * 1e3, 1) if samples else None,
                "max": round(max(samples) * 1e3, 1) if samples else None,
                "load_average": load_average(),
            }
            mass = untouched(fleet, used, max(1, round(size * MASS_FRACTION)))
            now = datetime.now(UTC)
            started = time.monotonic()
            monitors.HttpSink(url, TOKEN, timeout_seconds=MASS_TIMEOUT_SECONDS).send(
                [sim_load.fault_event(n, now) for n in mass]
            )
            try:
                done = watcher.wait_for(mass, MASS_TIMEOUT_SECONDS, partial=True)
            except RuntimeError:  # none within the deadline: recorded as 0 nodes/s, the other figures kept
                done = time.monotonic()
            cordoned = [n for n in mass if n in watcher.cordoned]
            figures["mass_cordon"] = {
                "nodes": len(mass),
                "cordoned": len(cordoned),
                "seconds": round(done - started, 2),
                "nodes_per_second": round(len(cordoned) / (done - started), 1),
                "load_average": load_average(),
            }
            figures["mass_cordon"]["kubectl_reference"] = kubectl_cordon(
                kubectl, kubeconfig, untouched(fleet, used, len(mass)), watcher
            )
            figures["flood"] = flood(url, store_url, fleet, used, watcher)
            memory = proc_status(pid)
        finally:
            stop.set()
            runner.join(30)
            watcher.close()
        on_disk = store_bytes(store, store_url, db_path)
        figures["background"]["errors"] = load.report.errors
        figures["background"]["first_error"] = load.report.first_error
        figures["memory"] = {
            "sentinel_idle_rss_mb": round(idle["VmRSS"] / 1024, 1),
            "sentinel_rss_mb": round(memory["VmRSS"] / 1024, 1),
            "sentinel_peak_rss_mb": round(memory["VmHWM"] / 1024, 1),
            "store_mb": round(on_disk / 2**20, 1),
            "mb_per_node": round((memory["VmHWM"] * 1024 + on_disk) / 2**20 / size, 4),
        }
    return figures


def throughput(store: str, opener: Any, size: int) -> dict[str, Any]:
    """Ingest (batch 1,000) and the analyzer as a store consumer, bench_store's mix over `size` nodes."""
    events = bench_store.fleet_events(THROUGHPUT_EVENTS, salt=f"scale-{size}-{store}-", nodes=size)
    for event in events:
        _ = event.idempotency_key  # as in bench_store: the analyzer's figure excludes the key
    fresh = opener()
    ingest_seconds = bench_store.timed(lambda: bench_store.ingest(fresh, events, 1000))
    stage = analyzer_stage.AnalyzerStage(
        fresh, analyzer.Analyzer(analyzer.shipped_rules()), owner="bench", batch_size=500
    )

    def drain() -> None:
        while stage.step():
            pass

    analyzer_seconds = bench_store.timed(drain)
    fresh.close()
    return {
        "ingest_events_per_second": round(len(events) / ingest_seconds),
        "analyzer_events_per_second": round(len(events) / analyzer_seconds),
        "load_average": load_average(),
    }


def watch_memory(kubeconfig: Path) -> dict[str, Any]:
    """Bytes per node of a watch view: whole Node objects vs the sentinel's slim ones."""
    out: dict[str, Any] = {}
    with KubeClient(kubeconfig) as client:
        for label, keep in (("whole_nodes", None), ("slim_nodes", kube_nodes.slim_node)):
            view = client.watch_nodes({CLUSTER_LABEL: CLUSTER}, keep=keep)
            gc.collect()
            tracemalloc.start()
            items = view.sync()
            del items
            gc.collect()
            held, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            out[f"{label}_kb_per_node"] = round(held / max(len(view.objects), 1) / 1024, 2)
            del view
    return out


def options(argv: list[str]) -> tuple[tuple[int, ...], tuple[str, ...], Path]:
    sizes, stores, out = SIZES, STORES, HERE / "results"
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "--quick":
            sizes, stores = (1000,), ("sqlite",)
        elif key == "--sizes":
            sizes = tuple(int(v) for v in value.split(","))
        elif key == "--stores":
            stores = tuple(v for v in value.split(",") if v in STORES)
        elif key == "--out":
            out = Path(value)
        else:
            raise SystemExit(
                f"bench_scale: unknown argument {arg!r}; allowed: --quick --sizes=N,.. --stores=.. --out=DIR"
            )
    return sizes, stores, out


def main(argv: list[str] | None = None) -> None:
    sizes, stores, out = options(sys.argv[1:] if argv is None else argv)
    command = "python bench/run.py scale " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"command: {command.strip()}  (load average at start: {load_average()})", flush=True)
    found = binaries.resolve(progress=lambda line: print(line, file=sys.stderr))
    began = time.monotonic()
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "command": command.strip(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "background_events_per_node_per_second": RATE,
        "kwok": {str(s): vars(kwok.fleet_tuning(s)) for s in sizes},
        "targets": TARGETS,
        "rows": rows,
    }
    with tempfile.TemporaryDirectory(prefix="dsx-bench-scale-") as scratch, _postgres(stores) as server:
        folder = Path(scratch)
        cluster = SimCluster(CLUSTER, root=folder / "sim")
        used: set[str] = set()
        try:
            for size in sizes:
                up_started = time.monotonic()
                status = cluster.up(
                    SimOptions(nodes=size), die_with_parent=True, progress=lambda m: print(m, flush=True)
                )
                assert status.kubeconfig is not None
                fleet = list(status.node_names)
                print(f"  {size} nodes Ready in {time.monotonic() - up_started:.0f} s (load {load_average()})")
                watched = watch_memory(status.kubeconfig)
                for store in stores:
                    db_path = folder / f"{size}-{store}.db"
                    url = f"sqlite:///{db_path}" if store == "sqlite" else fresh_schema_url(server.url)
                    try:
                        row = sentinel_round(
                            folder, status.kubeconfig, store, url, db_path, fleet, used, found["kubectl"]
                        )
                    except (RuntimeError, OSError, errors.DsxError) as exc:  # recorded; the matrix goes on
                        rows.append({"nodes": size, "store": store, "error": str(exc), "load_average": load_average()})
                        print(f"  {size} {store}: FAILED: {exc}", flush=True)
                        continue
                    row["node_watch"] = watched

                    def opener(s: str = store, n: int = size) -> Any:
                        if s == "sqlite":
                            return open_store(f"sqlite:///{folder / f'throughput-{n}.db'}")
                        return open_store(fresh_schema_url(server.url))

                    row["throughput"] = throughput(store, opener, size)
                    rows.append(row)
                    print(_line(row), flush=True)
        finally:
            cluster.down()
    result["wall_seconds"] = round(time.monotonic() - began, 1)
    out.mkdir(parents=True, exist_ok=True)
    name = "scale-quick" if sizes == (1000,) and stores == ("sqlite",) else "scale"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / f"{name}.html").write_text(plot(result), encoding="utf-8")
    print(_table(rows))
    print(f"wrote {out / f'{name}.json'} and {name}.html; wall {result['wall_seconds']:.0f} s")


@contextmanager
def _postgres(stores: tuple[str, ...]) -> Iterator[Any]:
    if "postgresql" not in stores:
        yield None
        return
    with running_postgres(durable=True) as server:
        yield server


def _line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"  {row['nodes']:>6} {row['store']:<10} FAILED: {row['error']}"
    f, m, c, t = row["fault_to_cordon_ms"], row["memory"], row["mass_cordon"], row["throughput"]
    w = row["flood"]
    return (
        f"  {row['nodes']:>6} {row['store']:<10} {m['mb_per_node']:.3f} MB/node, fault-to-cordon p50 {f['p50']} /"
        f" p99 {f['p99']} / max {f['max']} ms, cordon {c['nodes_per_second']} nodes/s, analyzer"
        f" {t['analyzer_events_per_second']} ev/s, ingest {t['ingest_events_per_second']} ev/s,"
        f" {row['background']['cpu_seconds_per_1000_events']} CPU s/1k events (load {f['load_average']});"
        f" kubectl cordon {c['kubectl_reference']['nodes_per_second']} nodes/s; flood {w['routine_events_per_second']}"
        f" ev/s, Xid cordoned in {w['fault_to_cordon_max_ms']} ms max behind {w['quarantine_backlog_events_median']}"
        f" events (load {w['load_average']})"
    )


def _table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| nodes | store | MB/node | f2c p50/p99/max ms | cordon nodes/s (kubectl) | flood ev/s, Xid max ms"
        " | analyzer ev/s | ingest ev/s | CPU s/1k ev | load |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if "error" in r:
            failed = f"failed: {r['error'][:80]}"
            lines.append(f"| {r['nodes']} | {r['store']} | {failed} | | | | | | | {r['load_average']} |")
            continue
        f = r["fault_to_cordon_ms"]
        lines.append(
            f"| {r['nodes']} | {r['store']} | {r['memory']['mb_per_node']:.3f} | {f['p50']}/{f['p99']}/{f['max']} |"
            f" {r['mass_cordon']['nodes_per_second']} ({r['mass_cordon']['kubectl_reference']['nodes_per_second']}) |"
            f" {r['flood']['routine_events_per_second']}, {r['flood']['fault_to_cordon_max_ms']} |"
            f" {r['throughput']['analyzer_events_per_second']} |"
            f" {r['throughput']['ingest_events_per_second']} | {r['background']['cpu_seconds_per_1000_events']} |"
            f" {f['load_average']} |"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> str:
    """A small self-contained HTML page: two SVG line charts (p99 fault-to-cordon, MB/node) by fleet size."""
    rows = [r for r in result["rows"] if "error" not in r and r["fault_to_cordon_ms"]["p99"] is not None]
    charts = []
    for title, pick, unit in (
        ("fault-to-cordon p99", lambda r: r["fault_to_cordon_ms"]["p99"], "ms"),
        ("memory per node (sentinel + store)", lambda r: r["memory"]["mb_per_node"], "MB"),
    ):
        series: dict[str, list[tuple[int, float]]] = {}
        for r in rows:
            series.setdefault(r["store"], []).append((r["nodes"], float(pick(r))))
        top = max([v for s in series.values() for _, v in s] + [1e-9]) * 1.15
        right = max([n for s in series.values() for n, _ in s] + [1])
        width, height, pad = 420, 220, 40
        svg = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
        svg.append(f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" stroke="#888"/>')
        svg.append(f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - pad}" stroke="#888"/>')
        svg.append(f'<text x="{pad}" y="{height - 8}" font-size="11">nodes (0..{right})</text>')
        svg.append(f'<text x="2" y="20" font-size="11">{top:.3g} {unit}</text>')
        for colour, (store, points) in zip(("#1f6feb", "#d1242f"), sorted(series.items()), strict=False):
            xy = [
                (pad + (n / right) * (width - pad - 10), (height - pad) - (v / top) * (height - pad - 10))
                for n, v in points
            ]
            svg.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                + " ".join(f"{x:.0f},{y:.0f}" for x, y in xy)
                + '"/>'
            )
            for (x, y), (n, v) in zip(xy, points, strict=True):
                svg.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="3" fill="{colour}"><title>{n}: {v}</title></circle>')
            svg.append(
                f'<text x="{xy[-1][0] - 60:.0f}" y="{xy[-1][1] - 6:.0f}" font-size="11" fill="{colour}">{store}</text>'
            )
        svg.append("</svg>")
        charts.append(f"<h3>{title} ({unit})</h3>" + "".join(svg))
    return (
        "<!doctype html><meta charset='utf-8'><title>dsx sentinel at fleet size</title>"
        f"<h2>dsx sentinel at fleet size</h2><p><code>{result['command']}</code>, {result['date']}</p>"
        + "".join(charts)
        + "<pre>"
        + _table(result["rows"])
        + "</pre>"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--flood-sender"]:
        flood_sender(sys.argv[2:])
    else:
        main()
