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
                "repairSeconds": {"quarantine": 2.4, "drain": 95.0},
            }
        ],
        "consumers": [
            {"consumer": "drain", "cursor": 7, "behindEvents": 3, "behindSeconds": 42.4, "historyLost": False},
            {"consumer": "remediation", "cursor": 12, "behindEvents": -2, "behindSeconds": 0.0, "historyLost": True},
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
    assert "q 2s d 2m" in text  # the latest incident's seconds per stage
    assert "LOST: cursor past the newest event" in text and " 42 " in text
    assert text.endswith("\n")


def test_replay_table_counts_each_section() -> None:
    report = {
        "policy": "p.yaml",
        "events": 3,
        "derivedEvents": 1,
        "quarantined": [{"node": "n1", "at": "t", "reason": "r"}],
        "drained": [{"node": "n1", "pods": [], "stillWaitingFor": ["a/b"]}],
        "remediated": [],
        "escalated": [],
        "breaker": {},
    }
    lines = sentinel_render.replay_table(report).splitlines()
    assert lines[0] == "policy: p.yaml  events: 3  derived: 1"
    assert "would quarantine: 1" in lines and "  n1  pods: -  waiting for: a/b" in lines
    assert lines[-1] == "breaker: closed"


def test_events_table_reads_the_camel_case_event_rows() -> None:
    row = {
        "sequence": 3,
        "storedAt": "2026-01-01T00:00:01+00:00",
        "generatedAt": "2026-01-01T00:00:00.000000Z",
        "nodeName": "n1",
        "checkName": "KernelLogXid",
        "errorCodes": ["79", "48"],
        "isFatal": True,
        "isHealthy": False,
        "recommendedAction": "RESTART_BM",
        "message": "GPU has fallen off the bus",
        "stages": {"quarantine": {"status": "done", "disposition": "cordoned"}},
    }
    table = sentinel_render.events_table([row])
    line = table.splitlines()[-1]
    for cell in ("3", "2026-01-01T00:00:00", "n1", "KernelLogXid", "79,48", "yes", "RESTART_BM", "cordoned"):
        assert cell in line
