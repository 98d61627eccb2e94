"""Operate: turn health observations into decisions (detect, analyse, quarantine, drain, remediate).

Two parts, layered (import-linter's `health-parts` contract holds the order):
- `decisions`: what each stage decides and does through ports (policy, breaker, quarantine,
  drain, remediation, re-certification, maintenance, validation requests, the store port);
- `parsing`: outside text and objects into health events (Xid lines, GPU reports, DCGM, the
  ingest body, node policies, Node Problem Detector events).

Domain code: no processes, sockets, devices or client libraries. It defines the ports it needs
(`decisions.eventstore.EventStore`, `decisions.ports.NodeOps`, `decisions.ports.RemediationProvider`,
`decisions.ports.Recertifier`); the adapters implement them
(`dsx.store`, `dsx.controllers.kube_nodes`, `dsx.remediators`, `dsx.executors`, `dsx.host`) and their
fakes live in `dsx.testing`. The runtime that feeds the decisions from the store, with its
threads, is `dsx.pipeline` (an adapter), which also owns the monitors' `HealthSource` port.
"""
