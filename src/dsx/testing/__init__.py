"""Fakes for the ports, in one public place: tests, benchmarks and `dsx sentinel replay` use them.

- `inmemory.InMemoryEventStore` — the event store (`dsx.health.decisions.eventstore.EventStore`);
- `inmemory_nodes.InMemoryNodeOps` — node operations (`dsx.health.decisions.ports.NodeOps`);
- `fake_nvml` — an NVML library for `dsx.host.nvml`, with scripted GPUs and faults;
- `fake_executor.FakeExecutor` / `FakeJobLauncher` — the certify executor and Job launcher;
- `simulated_fabric.SimulatedFabric` — the isolation prober over a fault model;
- `replay` — the sentinel pipeline run on the fakes above, touching nothing.

Each fake passes the same contract suite as its real adapter (tests/contracts/).
"""
