"""Certification: run real workloads over node groups, judge them, and isolate bad nodes.

The flow is plan (groups from topology labels, exclusions) → run (an `Executor`) → measure
(parse the nccl-tests / training output) → judge (CEL thresholds, reasons from a closed set) →
isolate (adaptive group testing over failed groups) → report. All of it is deterministic and
starts nothing; it reads only its catalog data (the log profiles, through `dsx.serialization`)
and the outputs it is handed. The executors that start processes or Jobs are adapters in `dsx.executors`, and
the category catalog is shared vocabulary in `dsx.model.certify_catalog`.
"""
