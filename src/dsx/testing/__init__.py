"""Fakes for the ports, in one public place: tests, benchmarks and `dsx sentinel replay` use them.

- `inmemory.InMemoryEventStore` — the event store (`dsx.health.decisions.eventstore.EventStore`);
- `inmemory_nodes.InMemoryNodeOps` — node operations (`dsx.health.decisions.ports.NodeOps`);
- `inmemory_maintenance.InMemoryMaintenanceRequests` — MaintenanceRequests
  (`dsx.health.decisions.ports.MaintenanceRequests`);
- `cluster_reader` — a cluster's objects held in memory (`dsx.validation.reading.ClusterReader`);
- `fake_nvml` — an NVML library for `dsx.host.nvml`, with scripted GPUs and faults;
- `fake_executor.FakeExecutor` / `FakeJobLauncher` — the certify executor and Job launcher;
- `simulated_fabric.SimulatedFabric` — the isolation prober over a fault model;
- `replay` — the sentinel pipeline run on the fakes above, touching nothing.

The event store, node operations, cluster reading and MaintenanceRequests fakes pass the same
contract suite as their real adapters (tests/contracts/). `fake_nvml`, the certify fakes and
`SimulatedFabric` have none: the real NVML needs a GPU, and the certify fakes stand in for whole
workloads, which the integration tests run for real on the simulator instead.
"""
