"""Operate: turn health observations into decisions (detect, analyse, quarantine, drain, remediate).

Pure domain code. It defines the ports it needs (`eventstore.EventStore`, monitors'
`HealthSource`) and never imports a database driver or a Kubernetes client; the adapters in
`dsx.store` and `dsx.kube` implement those ports.
"""
