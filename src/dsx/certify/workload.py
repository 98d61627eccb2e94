"""The worker's command line for one run: the same program locally and in a pod.

`python -m dsx.executors.local.worker run ...` is one rank whatever runs it: the local executor
forks it, the Kubernetes executor starts it under torchrun in each node's pod. Local runs use
the category's CPU-sized sweep and training shape; clusters use the published ones.
"""

from __future__ import annotations

from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

WORKER_MODULE = "dsx.executors.local.worker"
CRASH_EXIT_CODE = 134
"""What a rank killed by an abort reports through a shell (128 + SIGABRT)."""

WRONG_RESULTS_MARKER = "replicas out of sync"
"""The worker's line when training replicas drifted apart; the judge (`measure`) looks for it."""

WORKER_DATA_TYPES = frozenset({"float", "double", "uint8", "int32"})
"""Element types the worker validates exactly; other catalog types run as float."""


def worker_args(category: catalog.Category, timeouts: model.Timeouts, *, local: bool) -> list[str]:
    """Arguments after `python -m dsx.executors.local.worker`."""
    timeout = str(int(timeouts.run_timeout_seconds) + 5)
    if category.workload is model.WorkloadKind.TRAINING:
        shape = (category.local_training if local else None) or category.training
        if shape is None:
            raise ValueError(f"{category.name}: a training category without a training shape")
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
