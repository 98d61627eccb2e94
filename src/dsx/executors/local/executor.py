"""Run certification workloads on this machine, one process per rank, nodes simulated.

Nodes are named node-0 … node-(N-1); each holds `ranks_per_node` ranks. Ranks are forked by
one fork server (`worker serve`, started on first use) so a run costs a fork, not a torch
import; each rank rendezvouses through env:// on 127.0.0.1 with a fresh port per run. Runs go
one at a time: on a shared CPU, concurrent runs would steal each other's cycles and make
bandwidth meaningless.

A run ends when every rank has exited, when it passes `run_timeout_seconds`, or when no rank
has printed anything for `stall_timeout_seconds` (a hang); the last two kill every rank of the
run. Faults are injected per node through the rank environment (see worker.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from dsx.certify import workload
from dsx.certify.executor import Notice, Purpose, RunOutcome, WorkloadRun
from dsx.errors import BadInputError, UnavailableError
from dsx.model import certification as model

log = logging.getLogger("dsx.executors.local")

SLOW_FACTOR = 5.0
"""A slow node's link runs at 1/5 of the calibrated rate, below the local floor of 1/4 of it
whatever the load: the cap and the threshold share one reference (see worker.py)."""


SERVER_START_SECONDS = 180.0
"""Importing torch on a loaded 2-core machine can take tens of seconds."""


def node_names(count: int) -> list[str]:
    return [f"node-{i}" for i in range(count)]


class LocalExecutor:
    kind = "local"
    calibrates = True

    def __init__(
        self,
        node_count: int,
        *,
        injections: Sequence[model.FaultInjection] = (),
        slow_factor: float = SLOW_FACTOR,
        python: str = sys.executable,
        names: Sequence[str] = (),
    ) -> None:
        """`names` lets the local ranks stand in for real node names (e.g. a `dsx sim` cluster's)."""
        if node_count < 1:
            raise BadInputError(f"--nodes: must be at least 1, got {node_count}")
        if names and len(names) != node_count:
            raise BadInputError(f"--nodes: {node_count} nodes but {len(names)} names given")
        self._names = list(names) if names else node_names(node_count)
        unknown = [i.node for i in injections if i.node not in self._names]
        if unknown:
            raise BadInputError(
                f"--inject: unknown node {unknown[0]!r}; local nodes are {self._names[0]} … {self._names[-1]}"
            )
        self._faults = {i.node: i.kind for i in injections}
        self._slow_factor = slow_factor
        self._python = python
        self._server: _ForkServer | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="dsx-certify-"))
        self._sequence = 0

    def nodes(self) -> list[model.CandidateNode]:
        return [model.CandidateNode(name=n, allocatable_gpus=None, gpu_product="") for n in self._names]

    def run(self, runs: Sequence[WorkloadRun], notice: Notice | None = None) -> list[RunOutcome]:
        return [self._run_one(r) for r in runs]

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- one run ------------------------------------------------------------------------------

    def _run_one(self, run: WorkloadRun) -> RunOutcome:
        server = self._ensure_server()
        self._sequence += 1
        folder = self._workdir / f"{self._sequence:04d}"
        folder.mkdir()
        port = _free_port()
        argv = workload.worker_args(run.category, run.timeouts, local=True)
        ranks: list[tuple[str, str, Path]] = []  # (request id, node, log)
        for index, node in enumerate(run.nodes):
            for local_rank in range(run.ranks_per_node):
                rank = index * run.ranks_per_node + local_rank
                log = folder / f"rank-{rank}.log"
                env: dict[str, object] = {
                    "RANK": rank,
                    "WORLD_SIZE": run.world_size,
                    "LOCAL_RANK": local_rank,
                    "LOCAL_WORLD_SIZE": run.ranks_per_node,
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port,
                    "GLOO_SOCKET_IFNAME": "lo",
                    "DSX_NODE_NAME": node,
                    # every simulated node shares this machine's GPUs: a rank takes GPU rank % count
                    "DSX_DEVICE_INDEX": rank,
                }
                env.update(self._fault_env(run, node, folder / f"rank-{rank}.progress"))
                ident = f"{self._sequence}/{rank}"
                server.start(ident, argv, env, log)
                ranks.append((ident, node, log))
        started = time.monotonic()
        last_output, last_size = started, 0
        timed_out = stalled = False
        idents = [i for i, _, _ in ranks]
        while not server.all_exited(idents):
            time.sleep(0.05)
            now = time.monotonic()
            size = sum(_size(log) + _size(log.with_suffix(".progress")) for _, _, log in ranks)
            if size != last_size:
                last_output, last_size = now, size
            if now - started > run.timeouts.run_timeout_seconds:
                timed_out = True
            elif now - last_output > run.timeouts.stall_timeout_seconds:
                stalled = True
            if timed_out or stalled:
                server.kill(idents)
                server.wait(idents, 10.0)
                break
        duration = time.monotonic() - started
        codes: dict[str, list[int | None]] = {}
        logs: dict[str, list[str]] = {}
        for ident, node, log in ranks:
            codes.setdefault(node, []).append(server.exit_code(ident))
            logs.setdefault(node, []).append(_read(log))
        exits = {node: next((c for c in node_codes if c != 0), 0) for node, node_codes in codes.items()}
        launcher = _read(ranks[0][2]) if ranks else ""
        return RunOutcome(
            run=run,
            launcher_log=launcher,
            node_logs={node: "".join(parts) for node, parts in logs.items()},
            exit_codes=exits,
            timed_out=timed_out,
            stalled=stalled,
            duration_seconds=duration,
        )

    def _fault_env(self, run: WorkloadRun, node: str, progress: Path) -> dict[str, object]:
        """Progress file, and the node's injected fault (never in calibration runs)."""
        env: dict[str, object] = {"DSX_PROGRESS_FILE": progress, "DSX_SLOW_FACTOR": self._slow_factor}
        fault = self._faults.get(node) if run.purpose is not Purpose.CALIBRATION else None
        if fault is None:
            return env
        env["DSX_FAULT"] = fault.value
        if fault is model.FaultKind.SLOW:
            algbw = run.reference.get(model.Metric.ALG_BANDWIDTH_GBPS)
            step = run.reference.get(model.Metric.AVG_STEP_TIME_SECONDS)
            if algbw:
                env["DSX_SLOW_ALGBW_GBPS"] = repr(algbw / self._slow_factor)
            if step:
                env["DSX_SLOW_STEP_SECONDS"] = repr(step * self._slow_factor)
        return env

    def start(self) -> None:
        """Start the worker server now (it imports torch: seconds) rather than inside the first run."""
        self._ensure_server()

    def _ensure_server(self) -> _ForkServer:
        if self._server is None:
            self._server = _ForkServer(self._python)
        return self._server


def _log_lines(stream: IO[bytes]) -> None:
    for raw in stream:
        text = raw.decode("utf-8", "replace").rstrip()
        if text:
            log.warning("local worker server: %s", text[:2000])


class _ForkServer:
    """The `worker serve` process: start ranks by JSON request, track their exit codes."""

    def __init__(self, python: str) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        try:
            self._process = subprocess.Popen(
                [python, "-m", "dsx.executors.local.worker", "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise UnavailableError(f"cannot start the local worker server: {exc.strerror}") from exc
        assert self._process.stderr is not None
        # whatever the server or torch prints becomes log records, so a JSON log stays one object a line
        threading.Thread(target=_log_lines, args=(self._process.stderr,), name="worker-stderr", daemon=True).start()
        self._lock = threading.Condition()
        self._pids: dict[str, int] = {}
        self._exits: dict[str, int] = {}
        self._ready = False
        assert self._process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True)
        self._reader.start()
        with self._lock:  # importing torch takes seconds: that is not the ranks' time
            deadline = time.monotonic() + SERVER_START_SECONDS
            while not self._ready and self._process.poll() is None and time.monotonic() < deadline:
                self._lock.wait(0.2)
        if not self._ready:
            self.close()
            raise UnavailableError(
                "the local worker server did not start; is torch installed (pip install 'dsx[collectives]')?"
            )

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            message: dict[str, Any] = json.loads(line)
            with self._lock:
                self._ready = self._ready or bool(message.get("ready"))
                if "pid" in message:
                    self._pids[message["id"]] = int(message["pid"])
                if "exit" in message:
                    self._exits[message["id"]] = int(message["exit"])
                self._lock.notify_all()
        with self._lock:
            self._lock.notify_all()

    def start(self, ident: str, argv: list[str], env: Mapping[str, object], log: Path) -> None:
        request = {"id": ident, "argv": argv, "env": {k: str(v) for k, v in env.items()}, "log": str(log)}
        assert self._process.stdin is not None
        try:
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
        except BrokenPipeError as exc:
            raise UnavailableError("the local worker server died; is torch installed (dsx[collectives])?") from exc

    def all_exited(self, idents: Sequence[str]) -> bool:
        with self._lock:
            if self._process.poll() is not None and not all(i in self._exits for i in idents):
                raise UnavailableError(
                    f"the local worker server exited with code {self._process.returncode}; "
                    "is torch installed (pip install 'dsx[collectives]')?"
                )
            return all(i in self._exits for i in idents)

    def exit_code(self, ident: str) -> int | None:
        with self._lock:
            return self._exits.get(ident)

    def kill(self, idents: Sequence[str]) -> None:
        deadline = time.monotonic() + 5.0
        with self._lock:
            while not all(i in self._pids for i in idents) and time.monotonic() < deadline:
                self._lock.wait(0.1)
            pids = [self._pids[i] for i in idents if i in self._pids and i not in self._exits]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def wait(self, idents: Sequence[str], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with self._lock:
            while not all(i in self._exits for i in idents) and time.monotonic() < deadline:
                self._lock.wait(0.1)

    def close(self) -> None:
        if self._process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._reader.join(timeout=5)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
