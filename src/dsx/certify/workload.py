"""What runs for one workload run: the program's command line, image, runtime and environment.

Pure: the engine's decisions (program, fabric) and the catalog's data (workloads, platforms) in,
plain values out; the Kubernetes executor renders them into a TrainJob, the local executor
forks the builtin worker with `worker_args`.

- nccl-tests across nodes: mpirun from the launcher (Trainer's MPI runtime writes the hostfile
  and the SSH keys), one rank per GPU (`-N`), the platform's variables exported to every rank
  (`-x NAME`), then `<binary> -b -e -f -n -w` as NVCRE runs it; on one node the binary alone
  with `-g <GPUs>` (one process, every GPU of the node).
- Megatron-LM: torchrun (it reads the PET_* variables Trainer's torch runtime sets) over
  `pretrain_gpt.py` with the category's model flags, mock data, the accelerator's tensor
  parallelism and a global batch of one sample per GPU (NVCRE's nemotron5-8b train.sh).
- builtin: torchrun over dsx's worker (`python -m dsx.executors.local.worker run ...`), the same
  program the local executor forks.

Every run sets `NCCL_DEBUG=INFO`: the transport NCCL chose is read back from those lines.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

WORKER_MODULE = "dsx.executors.local.worker"
CRASH_EXIT_CODE = 134
"""What a rank killed by an abort reports through a shell (128 + SIGABRT)."""

WRONG_RESULTS_MARKER = "replicas out of sync"
"""The worker's line when training replicas drifted apart; the judge (`measure`) looks for it."""

WORKER_DATA_TYPES = frozenset({"float", "double", "uint8", "int32"})
"""Element types the worker validates exactly; other catalog types run as float."""

SSH_KEYS_MOUNT = "/tmp/mpi-ssh-raw"  # noqa: S108  (where Trainer mounts the run's SSH keys; the runtime says so)
"""sshAuthMountPath of the dsx-nccl-tests runtime: keys are copied from here into ~/.ssh (sshd wants 0600)."""
NCCL_DEBUG = {"NCCL_DEBUG": "INFO"}
TIMEOUT_GRACE_SECONDS = 30
"""`timeout` inside the pod outlasts the run deadline a little: the engine's own clock decides first."""


class ResultsFrom(enum.StrEnum):
    """Which pod's log holds the figures."""

    LAUNCHER = "launcher"  # mpirun's pod: nccl-tests prints its table from rank 0 there
    FIRST = "first"  # rank 0 (the builtin worker; one-node runs)
    LAST = "last"  # the last rank (Megatron-LM prints training_log on the last pipeline rank)


@dataclass(frozen=True)
class Launch:
    runtime: str  # the Trainer runtime (catalog component kubeflow-trainer-runtimes)
    image: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    procs_per_node: int
    results_from: ResultsFrom
    init_env: Mapping[str, str] = field(default_factory=dict)  # for the runtime's init container (Megatron source)
    source: str = ""  # where the command line comes from


def launch(
    run_category: catalog.Category,
    program: model.Program,
    *,
    nodes: int,
    gpus_per_node: int,
    platform: catalog.Platform,
    accelerator: str,
    timeouts: model.Timeouts,
    image: str = "",
    builtin_image: str = "",
    megatron_source: Mapping[str, str] | None = None,
) -> Launch:
    """The launch of `program` for one run of `run_category` on `nodes` nodes of `gpus_per_node` GPUs."""
    env = {**NCCL_DEBUG, **platform.env}
    seconds = int(timeouts.run_timeout_seconds) + TIMEOUT_GRACE_SECONDS
    if program is model.Program.BUILTIN:
        args = worker_args(run_category, timeouts, local=False)
        return Launch(
            runtime=catalog.BUILTIN_RUNTIME,
            image=image or builtin_image,
            command=("torchrun", "-m", WORKER_MODULE, *args),
            env=env,
            procs_per_node=gpus_per_node,
            results_from=ResultsFrom.FIRST,
            source="dsx builtin worker",
        )
    shipped = catalog.workloads()[program]
    chosen_image = image or platform.images.get(program) or shipped.image
    if program is model.Program.MEGATRON_LM:
        return _megatron(run_category, shipped, chosen_image, env, nodes, gpus_per_node, accelerator, megatron_source)
    return _nccl_tests(run_category, shipped, platform, chosen_image, env, nodes, gpus_per_node, seconds)


def _nccl_tests(
    category: catalog.Category,
    shipped: catalog.Workload,
    platform: catalog.Platform,
    image: str,
    env: Mapping[str, str],
    nodes: int,
    gpus: int,
    seconds: int,
) -> Launch:
    sweep = category.sweep
    if sweep is None or not category.binary:
        raise ValueError(f"{category.name}: nccl-tests needs a binary and a sweep")
    folder = platform.nccl_tests_path or shipped.nccl_tests_path
    suffix = "" if platform.nccl_tests_path else shipped.binary_suffix
    binary = f"{folder.rstrip('/')}/{category.binary}{suffix}"
    perf = [
        binary,
        f"-b{sweep.min_bytes}",
        f"-e{sweep.max_bytes}",
        f"-f{sweep.step_factor}",
        f"-n{sweep.iterations}",
        f"-w{sweep.warmup_iterations}",
    ]
    if category.data_type != "float":
        perf.append(f"-d{category.data_type}")
    if nodes == 1:
        return Launch(
            runtime=shipped.single_node_runtime or shipped.runtime,
            image=image,
            command=("timeout", str(seconds), *perf, f"-g{gpus}"),
            env=env,
            procs_per_node=1,
            results_from=ResultsFrom.FIRST,
            source=shipped.source,
        )
    mpirun = platform.mpirun or shipped.mpirun
    exported = [part for name in sorted(env) for part in ("-x", name)]
    line = [
        "timeout",
        str(seconds),
        mpirun,
        "--allow-run-as-root",
        "-N",
        str(gpus),
        "--mca",
        "plm_rsh_args",
        "-o StrictHostKeyChecking=no",
        *exported,
        *perf,
    ]
    keys = f"mkdir -p /root/.ssh && cp {SSH_KEYS_MOUNT}/* /root/.ssh/ && chmod 700 /root/.ssh && chmod 600 /root/.ssh/*"
    return Launch(
        runtime=shipped.runtime,
        image=image,
        command=("/bin/bash", "-c", f"{keys} && exec {shlex.join(line)}"),
        env=env,
        procs_per_node=gpus,
        results_from=ResultsFrom.LAUNCHER,
        source=shipped.source,
    )


def _megatron(
    category: catalog.Category,
    shipped: catalog.Workload,
    image: str,
    env: Mapping[str, str],
    nodes: int,
    gpus: int,
    accelerator: str,
    source: Mapping[str, str] | None,
) -> Launch:
    shape = category.megatron
    if shape is None:
        raise ValueError(f"{category.name}: Megatron-LM needs a megatron shape")
    world = nodes * gpus
    tensor = min(shape.tensor_parallel_for(accelerator), gpus)
    command = (
        "torchrun",
        f"{shipped.megatron_path.rstrip('/')}/pretrain_gpt.py",
        *shape.arguments,
        f"--tensor-model-parallel-size={tensor}",
        f"--global-batch-size={world}",  # NVCRE: one sample per GPU (micro-batch 1)
        f"--train-iters={shape.train_iterations}",
        f"--log-interval={shape.log_interval}",
        f"--eval-interval={shape.train_iterations}",
    )
    return Launch(
        runtime=shipped.runtime,
        image=image,
        command=command,
        env=env,
        procs_per_node=gpus,
        results_from=ResultsFrom.LAST,
        init_env=dict(source or {}),
        source=shape.source,
    )


def worker_args(category: catalog.Category, timeouts: model.Timeouts, *, local: bool) -> list[str]:
    """Arguments after `python -m dsx.executors.local.worker` (the builtin worker)."""
    timeout = str(int(timeouts.run_timeout_seconds) + 5)
    if category.workload is model.WorkloadKind.TRAINING:
        shape = category.local_training
        if shape is None:
            raise ValueError(f"{category.name}: a training category without a builtin training shape")
        return [
            "run",
            "--workload=training",
            f"--steps={shape.steps}",
            f"--warmup-steps={shape.warmup_steps}",
            f"--log-interval={shape.log_interval}",
            f"--hidden-size={shape.hidden_size}",
            f"--layers={shape.layers}",
            f"--micro-batch-size={shape.micro_batch_size}",
            f"--timeout-seconds={timeout}",
        ]
    sweep = (category.local_sweep if local else None) or category.sweep
    if sweep is None or category.collective is None:
        raise ValueError(f"{category.name}: a collective category without a collective and a sweep")
    data_type = category.data_type if category.data_type in WORKER_DATA_TYPES else "float"
    return [
        "run",
        "--workload=collective",
        f"--collective={category.collective.value}",
        f"--data-type={data_type}",
        f"--min-bytes={sweep.min_bytes}",
        f"--max-bytes={sweep.max_bytes}",
        f"--step-factor={sweep.step_factor}",
        f"--iters={sweep.iterations}",
        f"--warmup-iters={sweep.warmup_iterations}",
        f"--timeout-seconds={timeout}",
    ]
