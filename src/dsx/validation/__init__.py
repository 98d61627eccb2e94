"""Hold a live cluster (or its snapshot) against a recipe: snapshot, validate, diff, attest.

The domain half of `dsx snapshot`, `dsx validate` and `dsx diff`. It reads the cluster only
through the small `reading.ClusterReader` protocol (dsx.kube implements it;
`dsx.testing.cluster_reader.FakeClusterReader` stands in for unit tests) and is handed host
facts already read (`dsx.host.snapshot` probes the machine), so every check runs the same
against a real cluster, the simulator and fixture files.
"""
