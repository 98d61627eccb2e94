"""Long-running controllers: composition roots that wire domain stages to adapters.

`dsx.controllers.sentinel` builds the operate pipeline (monitors, analyzer, quarantine, drain,
remediation, re-certification, validation requests) over an event store and a cluster, and
serves its health, metrics and ingestion endpoints. Business rules live in `dsx.health`; this
package only constructs, connects, runs threads and translates to HTTP and Prometheus.
"""
