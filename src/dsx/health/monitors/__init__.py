"""Monitors: sources of HealthEvents (kernel log, NVML, nvidia-smi/DCGM reports, Kubernetes objects).

Each monitor implements `source.HealthSource`; `source.pump` moves what it saw into an
EventStore and only then lets it persist its position, so a crash re-reads instead of losing.
"""
