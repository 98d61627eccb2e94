"""Monitors: the `source.HealthSource` port and the monitors that need no I/O.

Each monitor implements `source.HealthSource`; `source.pump` moves what it saw into an
EventStore and only then lets it persist its position, so a crash re-reads instead of losing.
Here: reports handed in as text (`reports`) and CEL policies over Node objects (`kube_objects`).
The monitors that read the machine (kernel log, NVML) are adapters in `dsx.host`.
"""
