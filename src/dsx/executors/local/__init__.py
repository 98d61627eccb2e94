"""The local executor: each simulated node is a set of worker processes on this machine.

Collectives run for real through torch.distributed (gloo on CPU, nccl when CUDA is present),
and print nccl-tests' text, so the same parsers and verdicts serve local and cluster runs.
"""
