"""The table renderers of `dsx sentinel events`, `status` and `replay` (text for people).

Why apart from `sentinel_cmd`: the commands choose and read the store; these only lay out the
documents the commands emit as JSON or YAML with `--format`, so they are tested and changed apart.
"""

from __future__ import annotations

from typing import Any

from dsx.cli import output as cli_output


def events_table(rows: list[dict[str, Any]]) -> str:
    """`dsx sentinel events`: one line an event."""
    headers = ["seq", "generated", "node", "check", "codes", "fatal", "action", "quarantine", "message"]
    body = [
        [
            r["sequence"],
            r["generatedAt"][:19],
            r["nodeName"],
            r["checkName"],
            ",".join(r["errorCodes"]),
            "yes" if r["isFatal"] else ("healthy" if r["isHealthy"] else "no"),
            r["recommendedAction"],
            str(r["stages"].get("quarantine", {}).get("disposition", "")),
            r["message"][:60],
        ]
        for r in rows
    ]
    return cli_output.format_table(headers, body)


def status_table(document: dict[str, Any]) -> str:
    """`dsx sentinel status`: nodes out of service, the breaker, validation requests, dead letters."""
    rows = []
    for node in document["nodes"]:
        path = (
            " → ".join([node["history"][0]["from"], *(m["to"] for m in node["history"])])
            if node["history"]
            else node["state"]
        )
        rows.append([node["node"], node["state"], node["since"][:19], node["reason"][:70], path, _repair(node)])
    text = cli_output.format_table(["node", "state", "since", "reason", "history", "repair"], rows)
    gate = document.get("breaker") or {}
    text += f"\nbreaker: {gate.get('state', 'closed')}"
    if gate.get("reason"):
        text += f" ({gate['reason']})"
    requests = document["validationRequests"]
    if requests:
        text += "\n\n" + cli_output.format_table(
            ["request", "node", "status", "reason", "detail"],
            [[r["id"], r["node"], r["status"], r["reason"][:50], r["detail"][:60]] for r in requests],
        )
    consumers = document.get("consumers") or []
    if consumers:
        text += "\n\nconsumers:\n" + cli_output.format_table(
            ["consumer", "cursor", "behind events", "behind seconds", "history"],
            [
                [c["consumer"], c["cursor"], c["behindEvents"], f"{c['behindSeconds']:.0f}", _history(c)]
                for c in consumers
            ],
        )
    parked = document.get("deadLetters") or []
    if parked:
        text += "\n\ndead letters (`dsx sentinel retry` replays them):\n" + cli_output.format_table(
            ["stage", "event", "node", "attempts", "parked", "error"],
            [
                [d["stage"], d["sequence"], d["node"], d["attempts"], d["parkedAt"][:19], d["error"][:70]]
                for d in parked
            ],
        )
    return text + "\n"


_REPAIR_LETTERS = {"quarantine": "q", "drain": "d", "remediation": "r", "recertify": "c", "total": "Σ"}


def _repair(node: dict[str, Any]) -> str:
    """`q 2s d 1m r 10m c 4m Σ 15m`: the latest incident's seconds per stage (dsx.health.decisions.repair_timing)."""
    spans = node.get("repairSeconds") or {}
    return " ".join(f"{_REPAIR_LETTERS[k]} {_duration(v)}" for k, v in spans.items() if k in _REPAIR_LETTERS) or "-"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _history(consumer: dict[str, Any]) -> str:
    return "LOST: cursor past the newest event" if consumer["historyLost"] else "ok"


def replay_table(report: dict[str, Any]) -> str:
    """`dsx sentinel replay`: what each stage would have done under the other policy."""
    lines = [f"policy: {report['policy']}  events: {report['events']}  derived: {report['derivedEvents']}", ""]
    sections: list[tuple[str, list[str]]] = [
        ("would quarantine", [f"{e['node']}  {e['at']}  {e['reason'][:90]}" for e in report["quarantined"]]),
        ("would drain", [_drained_line(e) for e in report["drained"]]),
        ("would remediate", [f"{e['node']}  {e['request']}  {e['reason'][:80]}" for e in report["remediated"]]),
        ("would escalate", [f"{e['node']}  {e['reason'][:100]}" for e in report["escalated"]]),
    ]
    for title, items in sections:
        lines.append(f"{title}: {len(items)}")
        lines.extend(f"  {item}" for item in items)
    gate = report["breaker"]
    lines.append(f"breaker: {gate.get('state', 'closed')}{' (' + gate['reason'] + ')' if gate.get('reason') else ''}")
    return "\n".join(lines) + "\n"


def _drained_line(entry: dict[str, Any]) -> str:
    pods = ", ".join(entry["pods"]) or "-"
    waiting = ", ".join(entry["stillWaitingFor"]) or "-"
    return f"{entry['node']}  pods: {pods}  waiting for: {waiting}"
