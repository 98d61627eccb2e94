"""Operate: turn health observations into decisions (detect, analyse, quarantine, drain, remediate).

Domain code: no processes, sockets, devices or client libraries (import-linter holds it to that).
It defines the ports it needs (`eventstore.EventStore`, `ports.NodeOps`, `ports.RemediationProvider`,
`ports.Recertifier`, the monitors' `HealthSource`); the adapters implement them (`dsx.store`,
`dsx.controllers.kube_nodes`, `dsx.remediators`, `dsx.executors`, `dsx.host`) and their fakes
live in `dsx.testing`.
"""
