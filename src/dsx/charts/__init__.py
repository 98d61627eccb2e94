"""Adapters that find chart data for `dsx lint`: directories, the chart cache, and Helm/OCI repositories.

`sources` holds the directory sources and the standard lookup chain (`default_source`),
`fetch` the HTTP client for Helm repositories and OCI registries, `archive` the unpacking of a
fetched chart into the cache. They implement `dsx.lint.ports.ChartSource`.
"""
