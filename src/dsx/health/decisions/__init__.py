"""The stage decisions: what the sentinel does about a node, given its events, its state and the policy.

Each stage handler (`quarantine`, `drain`, `remediation`, `recertify`) answers `stage.StageHandler`;
the breaker, incidents, maintenance requests and validation requests decide beside them. They act
only through ports (`eventstore.EventStore`, `ports.NodeOps`, …), so the runtime that calls them
(`dsx.pipeline`) and the adapters behind the ports can change without them.
"""
