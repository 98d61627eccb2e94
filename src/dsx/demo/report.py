"""The demo's summary as data (summary.json, timeline.json) and as one self-contained HTML page.

The page carries its own styles, no scripts and no fetches: it opens from a laptop's disk or
a CI artifact store without a network. Artifacts are linked by paths relative to the page, so
the output folder can be zipped and moved. Rendering is a pure function of the summary.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsx import __version__, serialization
from dsx.demo import journal

API_VERSION = "dsx.run/v1alpha1"
KIND = "DemoSummary"

ARTIFACT_TITLES = {
    "recipe": "Recipe (eks / h100 / ubuntu / training / kubeflow)",
    "recipeAttestation": "Recipe signature (Sigstore bundle)",
    "bundle": "Argo CD bundle",
    "bundleAttestation": "Bundle attestation (Sigstore bundle)",
    "publicKey": "Throwaway public key (verify with it)",
    "validationReport": "Validation report (CTRF JSON)",
    "validationAttestation": "Validation attestation (in-toto DSSE envelope)",
    "certificationReport": "Certification report (JSON)",
    "certificationHtml": "Certification report (HTML)",
    "sentinelPolicy": "Sentinel policy the demo ran (usable with dsx sentinel run --config)",
    "sentinelStore": "Sentinel event store (SQLite)",
    "sentinelLog": "Sentinel log (JSON lines)",
    "sentinelStatus": "Sentinel status: node states, history, re-certification requests",
    "simLogs": "Control-plane component logs (etcd, kube-apiserver, …, kwok)",
    "timeline": "Event timeline (JSON)",
    "summary": "This summary (JSON)",
    "report": "This page",
}


def summary(
    log: journal.Journal,
    *,
    isolated: Sequence[Mapping[str, Any]],
    remediated: Sequence[Mapping[str, Any]],
    artifacts: Mapping[str, Path],
    cluster: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "generator": f"dsx/{__version__}",
        "result": "passed" if log.passed else "failed",
        "interrupted": log.interrupted,
        "durationSeconds": round(log.elapsed(), 1),
        "cluster": dict(cluster),
        "steps": [s.to_dict() for s in log.steps],
        "isolated": [dict(entry) for entry in isolated],
        "remediated": [dict(entry) for entry in remediated],
        "artifacts": {role: str(path) for role, path in artifacts.items()},
    }


def timeline(log: journal.Journal) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "DemoTimeline", "events": [e.to_dict() for e in log.timeline]}


def to_json(document: Mapping[str, Any]) -> str:
    return serialization.dump_json(dict(document))


# ---- HTML ---------------------------------------------------------------------------------------

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:72rem;
color:#1d232a;padding:0 1rem}
h1{font-size:1.6rem;margin:0 0 .3rem}h2{font-size:1.15rem;margin:2rem 0 .6rem;border-bottom:1px solid #d8dde3;
padding-bottom:.2rem}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .55rem;border-bottom:1px solid #eceff2;
vertical-align:top}th{background:#f5f7f9;font-weight:600}td.num{text-align:right;white-space:nowrap;
font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:.05rem .5rem;border-radius:.7rem;font-size:.8rem;font-weight:600;
text-transform:uppercase;letter-spacing:.03em}
.passed,.healthy{background:#dcf5e3;color:#17642f}.failed{background:#fde2e1;color:#a0231c}
.skipped{background:#eceff2;color:#56606b}
.state{background:#e6eefc;color:#1e4a9a}
.chain{display:flex;flex-wrap:wrap;gap:.3rem;align-items:center}.chain .arrow{color:#8a949e}
.meta{color:#56606b}code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.9em}
a{color:#1e4a9a}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _badge(status: str) -> str:
    return f'<span class="badge {_e(status)}">{_e(status)}</span>'


def _link(target: str, base: Path) -> str:
    """A path relative to the page (`base`), with forward slashes, for an href."""
    relative = os.path.relpath(target, base)
    return Path(relative).as_posix()


def html_page(document: Mapping[str, Any], timeline_events: Sequence[Mapping[str, Any]], *, base: Path) -> str:
    """The report page; `base` is the folder the page is written to (links are relative to it)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>dsx demo: the GPU cluster lifecycle</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>dsx demo {_badge(document['result'])}</h1>",
        f'<p class="meta">{_e(document["generator"])} · {len(document["steps"])} steps in '
        f"{_e(_duration(document['durationSeconds']))} · cluster {_e(document['cluster'].get('name', ''))}"
        f"{' (kept)' if document['cluster'].get('kept') else ' (removed at the end)'}</p>",
        _REAL,
        _steps(document["steps"]),
        _isolated(document["isolated"]),
        _remediated(document["remediated"]),
        _artifacts(document["artifacts"], base),
        _timeline(timeline_events),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


_REAL = (
    '<p class="meta">Real: the Kubernetes control plane (etcd, apiserver, scheduler, controllers), scheduling, '
    "evictions and PodDisruptionBudgets, signing and offline verification, every validation check, the "
    "collectives and training steps (gloo on this machine's CPUs, one process per rank), the sentinel pipeline "
    "and its store. Simulated: the GPU nodes and their pods (kwok), the installation (Helm release records and "
    "workloads the recipe's health checks name), the slow node (its ranks slowed tenfold) and the GPU fault "
    "(an Xid 79 line in the node's kernel log).</p>"
)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def _section(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *, empty: str = "") -> str:
    """A titled table; cells are HTML already escaped by the caller, `num` cells right-aligned."""
    if not rows and empty:
        return f"<h2>{_e(title)}</h2><p>{_e(empty)}</p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<h2>{_e(title)}</h2><table><tr>{head}</tr>{body}</table>"


class _Number(str):
    """A cell that holds a figure: right-aligned, tabular digits."""


def _cell(content: str) -> str:
    return f'<td class="num">{content}</td>' if isinstance(content, _Number) else f"<td>{content}</td>"


def _steps(steps: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            _e(s["title"]),
            _badge(s["status"]),
            _Number(f"{s['startedSeconds']:.1f} s"),
            _Number(f"{s['durationSeconds']:.1f} s"),
            _e(s["detail"]),
        ]
        for s in steps
    ]
    return _section("Steps", ["step", "status", "at", "took", "what happened"], rows)


def _isolated(entries: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [f"<code>{_e(e['node'])}</code>", _e(e.get("category", "")), _e(e["reason"]), _e(e.get("message", ""))]
        for e in entries
    ]
    headers = ["node", "category", "reason", "evidence"]
    return _section("Isolated by certification", headers, rows, empty="No node was isolated.")


def _remediated(entries: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for entry in entries:
        chain = '<span class="arrow">→</span>'.join(
            f'<span class="badge {"healthy" if s == "healthy" else "state"}">{_e(s)}</span>'
            for s in entry.get("states") or []
        )
        rows.append(
            [
                f"<code>{_e(entry['node'])}</code>",
                _e(entry.get("fault", "")),
                f'<div class="chain">{chain}</div>',
                _e(entry.get("finalState", "")),
            ]
        )
    headers = ["node", "fault", "state history", "final"]
    return _section("Remediated by the sentinel", headers, rows, empty="No node went through remediation.")


def _artifacts(artifacts: Mapping[str, str], base: Path) -> str:
    rows = [
        [
            _e(ARTIFACT_TITLES.get(role, role)),
            f'<a href="{_e(_link(path, base))}"><code>{_e(_link(path, base))}</code></a>',
        ]
        for role, path in artifacts.items()
    ]
    return _section("Artifacts", ["artifact", "file"], rows)


def _timeline(events: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            _Number(f"{e['elapsedSeconds']:.2f} s"),
            f"<code>{_e(e['at'])}</code>",
            _e(e["source"]),
            _e(e.get("node", "")),
            _e(e["message"]),
        ]
        for e in events
    ]
    return _section("Event timeline", ["at", "time (UTC)", "source", "node", "event"], rows)
