"""The `dsx sentinel` table renderers lay out the documents the commands emit, nothing more."""

from __future__ import annotations

from dsx.cli import sentinel_render


def test_status_table_shows_history_breaker_and_dead_letters() -> None:
    document = {
        "nodes": [
            {
                "node": "n1",
                "state": "quarantined",
                "since": "2026-01-01T00:00:00.123Z",
                "reason": "xid-79: GPU fell off the bus",
                "history": [{"from": "healthy", "to": "quarantined"}],
            }
        ],
        "breaker": {"state": "open", "reason": "3 of 4 nodes"},
        "validationRequests": [],
        "deadLetters": [
            {
                "stage": "drain",
                "sequence": 7,
                "node": "n1",
                "attempts": 5,
                "parkedAt": "2026-01-01T00:01:00Z",
                "error": "x",
            }
        ],
    }
    text = sentinel_render.status_table(document)
    assert "healthy → quarantined" in text
    assert "breaker: open (3 of 4 nodes)" in text
    assert "dead letters (`dsx sentinel retry` replays them):" in text
    assert text.endswith("\n")


def test_replay_table_counts_each_section() -> None:
    report = {
        "policy": "p.yaml",
        "events": 3,
        "derived_events": 1,
        "quarantined": [{"node": "n1", "at": "t", "reason": "r"}],
        "drained": [{"node": "n1", "pods": [], "still_waiting_for": ["a/b"]}],
        "remediated": [],
        "escalated": [],
        "breaker": {},
    }
    lines = sentinel_render.replay_table(report).splitlines()
    assert lines[0] == "policy: p.yaml  events: 3  derived: 1"
    assert "would quarantine: 1" in lines and "  n1  pods: -  waiting for: a/b" in lines
    assert lines[-1] == "breaker: closed"
