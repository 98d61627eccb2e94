"""One rank of a local certification workload, and a fork server that starts ranks cheaply.

`python -m dsx.executors.local.worker run ...` is one rank, configured like a torchrun child
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT: env:// rendezvous); it also runs
unchanged in a pod. It measures a collective sweep and prints nccl-tests' table (rank 0), or
trains a small model with DDP and prints Megatron-style iteration lines (every rank, so each
node's log carries its own step times).

`... serve` is the fork server the local executor talks to: importing torch costs seconds of
CPU, so the server imports it once and forks one child per rank; each child is a real
process with its own exit code, logs and rendezvous, killed on its own when it hangs.

Injected faults (DSX_FAULT) act inside the ranks of the faulty node: `slow` throttles the
node's link to a fixed fraction of this machine's calibrated rate (DSX_SLOW_ALGBW_GBPS caps
each timed operation's algorithm bandwidth, DSX_SLOW_STEP_SECONDS floors each training
step; without them every timed operation is stretched to `slow_factor` times its duration),
`hang` stalls after the first result, `crash` exits 134 after the first result, `corrupt`
perturbs the node's received data so validation counts wrong elements (training: its
parameter replica drifts). A cap taken from the same reference the judge uses keeps a slow
node below its threshold whatever the load on a shared machine does to the run.

Every rank appends a byte to DSX_PROGRESS_FILE after each operation or step, so the
executor can tell a rank blocked in a collective from one that is merely between rows.

torch is imported here only, lazily (pyproject.toml: the `collectives` extra is optional).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from dsx.certify import collectives, workload
from dsx.certify.parsing import nccl, nccl_writer, training
from dsx.model.certification import Collective, FaultKind

CRASH_EXIT_CODE = workload.CRASH_EXIT_CODE
WRONG_RESULTS_MARKER = workload.WRONG_RESULTS_MARKER


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return serve()
    return run(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dsx.executors.local.worker")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="fork server: read JSON requests on stdin, fork one rank per request")
    run_parser = sub.add_parser("run", help="run one rank (env:// rendezvous)")
    run_parser.add_argument("--workload", choices=["collective", "training"], required=True)
    run_parser.add_argument("--collective", choices=[c.value for c in Collective], default="all_reduce")
    run_parser.add_argument("--data-type", default="float", choices=sorted(collectives.TYPE_SIZES))
    run_parser.add_argument("--min-bytes", type=int, default=4096)
    run_parser.add_argument("--max-bytes", type=int, default=1 << 20)
    run_parser.add_argument("--step-factor", type=int, default=4)
    run_parser.add_argument("--iters", type=int, default=10)
    run_parser.add_argument("--warmup-iters", type=int, default=3)
    run_parser.add_argument("--steps", type=int, default=12)
    run_parser.add_argument("--warmup-steps", type=int, default=2)
    run_parser.add_argument("--log-interval", type=int, default=1)
    run_parser.add_argument("--hidden-size", type=int, default=256)
    run_parser.add_argument("--layers", type=int, default=3)
    run_parser.add_argument("--micro-batch-size", type=int, default=16)
    run_parser.add_argument("--slow-factor", type=float, default=float(os.environ.get("DSX_SLOW_FACTOR", "5")))
    run_parser.add_argument(
        "--timeout-seconds", type=float, default=float(os.environ.get("DSX_TIMEOUT_SECONDS", "600"))
    )
    return parser


# --- one rank ---------------------------------------------------------------------------------


class _Rank:
    """Identity and fault of this process, read from the torchrun-style environment."""

    def __init__(self) -> None:
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.node = os.environ.get("DSX_NODE_NAME") or socket.gethostname()
        fault = os.environ.get("DSX_FAULT", "")
        self.fault = FaultKind(fault) if fault else None
        self.slow_algbw_gbps = _positive_env("DSX_SLOW_ALGBW_GBPS")
        self.slow_step_seconds = _positive_env("DSX_SLOW_STEP_SECONDS")
        progress = os.environ.get("DSX_PROGRESS_FILE", "")
        self._progress = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if progress else None

    def progress(self) -> None:
        """One operation or step done: what tells a working rank from a hung one."""
        if self._progress is not None:
            os.write(self._progress, b".")

    def throttle(self, elapsed_seconds: float, floor_seconds: float | None, slow_factor: float) -> None:
        """On a slow node, make this operation last at least `floor_seconds` (else slow_factor × it)."""
        if self.fault is not FaultKind.SLOW:
            return
        wanted = floor_seconds if floor_seconds is not None else elapsed_seconds * slow_factor
        if wanted > elapsed_seconds:
            time.sleep(wanted - elapsed_seconds)

    def say(self, message: str) -> None:
        """A line on stderr naming the rank and node, like a launcher prefix would."""
        sys.stderr.write(f"dsx-worker: rank {self.rank} on {self.node}: {message}\n")
        sys.stderr.flush()

    def fault_point(self) -> None:
        """Where hang and crash strike: after the first result, mid-run like a real fault."""
        if self.fault is FaultKind.CRASH:
            self.say(f"injected crash, exiting with code {CRASH_EXIT_CODE}")
            sys.stdout.flush()
            os._exit(CRASH_EXIT_CODE)
        if self.fault is FaultKind.HANG:
            self.say("injected hang, stalling")
            while True:
                time.sleep(3600)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    me = _Rank()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        me.say("torch is not installed; install the collectives extra: pip install 'dsx[collectives]'")
        return 2
    torch.set_num_threads(1)
    backend, device = _backend(torch, me)
    try:
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=me.rank,
            world_size=me.world,
            timeout=datetime.timedelta(seconds=args.timeout_seconds),
        )
        if args.workload == "collective":
            _collective_sweep(args, me, torch, dist, device)
        else:
            _train(args, me, torch, dist, device)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:  # a peer died or the transport failed: report and exit like a rank would
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        me.say(f"{type(exc).__name__}: {first}")
        sys.stdout.flush()
        return 1
    sys.stdout.flush()
    return 0


def _backend(torch: Any, me: _Rank) -> tuple[str, Any]:
    """NCCL on a GPU where there is one for this rank, else gloo on the CPU.

    Under torchrun on a node the rank's GPU is its local rank; the local executor's simulated nodes
    share one machine's GPUs, so there the rank's global index (`DSX_DEVICE_INDEX`) picks it."""
    wanted = os.environ.get("DSX_CERTIFY_BACKEND", "")
    shared = os.environ.get("DSX_DEVICE_INDEX", "")
    if (wanted == "nccl" or not wanted) and torch.cuda.is_available():
        count = torch.cuda.device_count()
        index = int(shared) if shared.isdigit() else me.local_rank
        fits = me.world <= count if shared else index < count  # every rank of the run gets a GPU, or none does
        if fits:
            torch.cuda.set_device(index)
            return "nccl", torch.device("cuda", index)
    return "gloo", torch.device("cpu")


def _collective_sweep(args: argparse.Namespace, me: _Rank, torch: Any, dist: Any, device: Any) -> None:
    collective = Collective(args.collective)
    dtype = _dtype(torch, args.data_type)
    type_size = collectives.TYPE_SIZES[args.data_type]
    ranks: list[Any] = [None] * me.world
    dist.all_gather_object(ranks, (me.rank, os.getpid(), me.node, f"{device.type} ({dist.get_backend()})"))
    me.progress()
    if me.rank == 0:
        devices = [
            nccl.RankDevice(rank=rank, host=host, pid=pid, device=0, bus_id="0x00", name=name)
            for rank, pid, host, name in ranks
        ]
        preamble = nccl_writer.format_preamble(
            collective.value,
            min_bytes=args.min_bytes,
            max_bytes=args.max_bytes,
            devices=devices,
            step_factor=args.step_factor,
            warmup_iterations=args.warmup_iters,
            iterations=args.iters,
        )
        _emit(preamble + nccl_writer.format_table_head())
    rows: list[nccl.ResultRow] = []
    size = args.min_bytes
    while size <= args.max_bytes:
        count = collectives.count(collective, size, me.world, type_size)
        if count == 0:
            size *= args.step_factor
            continue
        moved = collectives.buffer_bytes(collective, size, me.world, type_size)
        times, wrongs = [], []
        for in_place in (False, True):
            op = _Operation(collective, count, dtype, me, torch, dist, device, in_place)
            floor = moved / (me.slow_algbw_gbps * 1e9) if me.slow_algbw_gbps else None
            times.append(op.time(args.iters, args.warmup_iters, floor, args.slow_factor) * 1e6)
            wrong = op.validate()
            wrongs.append(None if in_place and collective is Collective.ALLTOALL else wrong)  # nccl-tests: N/A
        row = nccl_writer.measure_row(
            collective.value,
            size_bytes=moved,
            count=count,
            type_name=args.data_type,
            redop=collectives.redop(collective),
            root=collectives.root(collective),
            ranks=me.world,
            out_of_place_us=times[0],
            in_place_us=times[1],
            out_of_place_wrong=wrongs[0],
            in_place_wrong=wrongs[1],
        )
        rows.append(row)
        if me.rank == 0:
            _emit(nccl_writer.format_row(row) + "\n")
        me.fault_point()
        size *= args.step_factor
    if me.rank == 0:
        _emit(nccl_writer.format_footer(rows) + nccl_writer.format_conclusion(collective.value))


def _emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class _Operation:
    """One collective at one size: buffers, the timed loop and the validation pass."""

    def __init__(
        self,
        collective: Collective,
        count: int,
        dtype: Any,
        me: _Rank,
        torch: Any,
        dist: Any,
        device: Any,
        in_place: bool,
    ) -> None:
        self.collective, self.count, self.dtype = collective, count, dtype
        self.me, self.torch, self.dist, self.device, self.in_place = me, torch, dist, device, in_place
        n = me.world
        split = collective in (Collective.ALL_GATHER, Collective.ALLTOALL, Collective.REDUCE_SCATTER)
        send_len = count * n if collective in (Collective.ALLTOALL, Collective.REDUCE_SCATTER) else count
        recv_len = count * n if collective in (Collective.ALL_GATHER, Collective.ALLTOALL) else count
        if not split:
            send_len = recv_len = count
        self.send = self._pattern(send_len, me.rank)
        self.recv = torch.zeros(recv_len, dtype=dtype, device=device)

    def _pattern(self, length: int, rank: int) -> Any:
        """Small integers, exact in every data type: element i of rank r is (r + 1 + i) % 7."""
        values = (self.torch.arange(length, device=self.device) + rank + 1) % 7
        return values.to(self.dtype)

    def _once(self) -> None:
        torch, dist, c = self.torch, self.dist, self.collective
        if c is Collective.ALL_REDUCE:
            if not self.in_place:
                self.recv.copy_(self.send)
            dist.all_reduce(self.recv if not self.in_place else self.send)
        elif c is Collective.BROADCAST:
            if not self.in_place:
                self.recv.copy_(self.send)
            dist.broadcast(self.recv if not self.in_place else self.send, src=0)
        elif c is Collective.ALL_GATHER:
            if self.in_place:
                chunk = self.recv.narrow(0, self.me.rank * self.count, self.count)
                chunk.copy_(self.send)
                dist.all_gather_into_tensor(self.recv, chunk)
            else:
                dist.all_gather_into_tensor(self.recv, self.send)
        elif c is Collective.REDUCE_SCATTER:
            if self.in_place:
                staged = self.send.clone()
                dist.reduce_scatter_tensor(staged.narrow(0, self.me.rank * self.count, self.count), staged)
                self.recv.copy_(staged.narrow(0, self.me.rank * self.count, self.count))
            else:
                dist.reduce_scatter_tensor(self.recv, self.send)
        else:
            dist.all_to_all_single(self.recv, self.send if not self.in_place else self.send.clone())
        del torch

    def time(self, iterations: int, warmup: int, floor_seconds: float | None, slow_factor: float) -> float:
        """Seconds per operation: the slowest rank's mean, as every rank waits for it."""
        for _ in range(warmup):
            self._once()
            self.me.progress()
        self._sync()
        self.dist.barrier()
        total = 0.0
        for _ in range(iterations):
            start = time.perf_counter()
            self._once()
            self._sync()
            self.me.throttle(time.perf_counter() - start, floor_seconds, slow_factor)
            total += time.perf_counter() - start
            self.me.progress()
        slowest = self.torch.tensor([total / iterations], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(slowest, op=self.dist.ReduceOp.MAX)
        return float(slowest.item())

    def validate(self) -> int:
        """Run once on fresh data and count wrong elements over all ranks (nccl-tests #wrong)."""
        n, torch = self.me.world, self.torch
        self.send = self._pattern(self.send.numel(), self.me.rank)
        self.recv.zero_()
        self._once()
        result = (
            self.send
            if self.in_place and self.collective in (Collective.ALL_REDUCE, Collective.BROADCAST)
            else self.recv
        )
        if self.me.fault is FaultKind.CORRUPT:
            result.view(-1)[:: max(1, result.numel() // 8)] += 3
        expected = self._expected(n)
        wrong = torch.tensor(
            [int((result.to(torch.float64) != expected).sum().item())], dtype=torch.int64, device=self.device
        )
        self.dist.all_reduce(wrong)
        self.me.progress()
        return int(wrong.item())

    def _expected(self, n: int) -> Any:
        """What a correct collective leaves here; sums come from a 7-entry table (the pattern's period)."""
        torch, c, count = self.torch, self.collective, self.count
        index = torch.arange(count, dtype=torch.int64, device=self.device)
        offset = self.me.rank * count
        sums = torch.tensor(
            [float(sum((k + r + 1) % 7 for r in range(n))) for k in range(7)], dtype=torch.float64, device=self.device
        )
        if c is Collective.ALL_REDUCE:
            return sums[index % 7]
        if c is Collective.REDUCE_SCATTER:
            return sums[(index + offset) % 7]
        if c is Collective.BROADCAST:
            return ((index + 1) % 7).to(torch.float64)
        if c is Collective.ALL_GATHER:
            return torch.cat([(index + r + 1) % 7 for r in range(n)]).to(torch.float64)
        # all-to-all: chunk j of the output is chunk `rank` of rank j's input
        return torch.cat([(index + offset + j + 1) % 7 for j in range(n)]).to(torch.float64)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()


def _dtype(torch: Any, name: str) -> Any:
    return {
        "float": torch.float32,
        "double": torch.float64,
        "half": torch.float16,
        "bfloat16": torch.bfloat16,
        "int32": torch.int32,
        "int64": torch.int64,
        "uint8": torch.uint8,
        "int8": torch.int8,
    }[name]


# --- training ---------------------------------------------------------------------------------


def _train(args: argparse.Namespace, me: _Rank, torch: Any, dist: Any, device: Any) -> None:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(1234)  # identical initial replicas, as DDP requires
    layers: list[Any] = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden_size, args.hidden_size), torch.nn.GELU()]
    layers.append(torch.nn.Linear(args.hidden_size, 16))
    net = torch.nn.Sequential(*layers).to(device)
    model = DistributedDataParallel(net) if device.type == "cpu" else DistributedDataParallel(net, device_ids=[device])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1000 + me.rank)
    inputs = torch.randn(args.micro_batch_size, args.hidden_size, generator=generator).to(device)
    labels = torch.randint(0, 16, (args.micro_batch_size,), generator=generator).to(device)
    parameters = sum(p.numel() for p in net.parameters())
    global_batch = args.micro_batch_size * me.world
    _megatron_line(
        f"using world size: {me.world}, data-parallel size: {me.world}, context-parallel size: 1, "
        f"tensor-model-parallel size: 1, pipeline-model-parallel size: 1"
    )
    window: list[float] = []
    me.progress()
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        me.throttle(time.perf_counter() - start, me.slow_step_seconds, args.slow_factor)
        me.progress()
        if me.fault is FaultKind.CORRUPT:
            with torch.no_grad():
                next(net.parameters()).view(-1)[0] += 1.0
        window.append(time.perf_counter() - start)
        if step % args.log_interval == 0:
            step_seconds = sum(window) / len(window)
            window.clear()
            _emit(
                training.format_dsx_train_line(
                    step=step,
                    total_steps=args.steps,
                    step_time_ms=step_seconds * 1e3,
                    tflops_per_gpu=6.0 * parameters * args.micro_batch_size / step_seconds / 1e12,
                    tokens_per_second=global_batch / step_seconds,
                    loss=float(loss.item()),
                    global_batch_size=global_batch,
                    timestamp=datetime.datetime.now(),
                )
                + "\n"
            )
        if step == args.warmup_steps + 1:
            me.fault_point()
    checksum = torch.tensor([sum(float(p.double().sum().item()) for p in net.parameters())], dtype=torch.float64)
    sums = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(me.world)]
    dist.all_gather(sums, checksum.to(device))
    drifted = [r for r, s in enumerate(sums) if not math.isclose(float(s.item()), float(sums[0].item()), rel_tol=1e-9)]
    if drifted:
        _megatron_line(f"validation: {WRONG_RESULTS_MARKER}: ranks {drifted} differ from rank 0")
    _megatron_line("[after training is done]")


def _megatron_line(text: str) -> None:
    _emit(f" [{datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}] {text}\n")


# --- fork server ------------------------------------------------------------------------------


def serve() -> int:
    """Read one JSON request per line on stdin; answer with JSON lines on stdout.

    Request: {"id", "argv", "env", "log"}: fork a rank with `env` added to the environment,
    stdout and stderr appended to `log`. Answers: {"id", "pid"} once forked and
    {"id", "exit"} when it ends (negative: killed by that signal). EOF on stdin ends the server
    and kills the ranks still running.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed
    from torch.nn.parallel import DistributedDataParallel  # noqa: F401  (imported once, for every child)

    torch.set_num_threads(1)
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # an optimizer's first use imports for seconds
    children: dict[int, str] = {}
    out = sys.stdout

    def say(message: dict[str, Any]) -> None:
        try:
            out.write(json.dumps(message) + "\n")
            out.flush()
        except (BrokenPipeError, ValueError):  # the executor went away (a stopped run): end quietly
            for pid in children:
                _kill(pid)
            os._exit(0)

    say({"ready": True})
    stdin = sys.stdin.fileno()
    buffer = b""
    open_input = True
    while open_input or children:
        readable, _, _ = select.select([stdin] if open_input else [], [], [], 0.05)
        if readable:
            chunk = os.read(stdin, 65536)
            if not chunk:
                open_input = False
                for pid in children:
                    _kill(pid)
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    request = json.loads(line)
                    pid = _fork_rank(request)
                    children[pid] = request["id"]
                    say({"id": request["id"], "pid": pid})
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            ident = children.pop(pid, None)
            if ident is not None:
                say({"id": ident, "exit": os.waitstatus_to_exitcode(status)})
    with contextlib.suppress(BrokenPipeError, ValueError):
        out.flush()
    os._exit(0)  # tearing down an interpreter that imported torch takes seconds; nothing is left to clean


def _fork_rank(request: dict[str, Any]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # the child must never return into the server loop
        sys.stderr.write(f"dsx-worker: {type(exc).__name__}: {exc}\n")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _positive_env(name: str) -> float | None:
    text = os.environ.get(name, "")
    return float(text) if text and float(text) > 0 else None


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
