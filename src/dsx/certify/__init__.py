"""Certification: run real workloads over node groups, judge them, and isolate bad nodes.

The flow is plan (groups from topology labels, exclusions) → run (an `Executor`: local
processes or Kubernetes Jobs) → measure (parse the nccl-tests / training output) → judge
(CEL thresholds, reasons from a closed set) → isolate (adaptive group testing over failed
groups) → report. Everything but the executors is pure and deterministic.
"""
