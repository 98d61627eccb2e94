"""Hold a live cluster (or its snapshot) against a recipe: snapshot, validate, diff, attest.

The domain half of `dsx snapshot`, `dsx validate` and `dsx diff`. It reads the cluster only
through the small `reading.ClusterReader` protocol (dsx.kube implements it; `FakeClusterReader`
stands in for unit tests) and the host only through a root folder, so every check runs the
same against a real cluster, the simulator and fixture files.
"""
