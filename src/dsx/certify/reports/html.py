"""The certification report as one self-contained HTML page: no scripts, fonts or network.

Charts are inline SVG drawn here from the report document: bus bandwidth over message size
per group (log2 size axis, the threshold as a dashed line when it is a plain bound), step
time per node for training, and the fault-isolation tree (one row per run, indented under the
run that led to it; inferred results are hollow). Failed nodes come with their reason,
measured and expected values and the log lines that show it.
"""

# ruff: noqa: E501  (SVG and HTML markup reads better on one line)
from __future__ import annotations

import math
from html import escape
from typing import Any

_PALETTE = ("#2f6db5", "#d9822b", "#3a9a5b", "#8e5bb5", "#c0392b", "#1a9aa0", "#7f7f7f", "#b5a22f")
_PASS, _FAIL = "#3a9a5b", "#c0392b"

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem;color:#222;max-width:1100px}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin-bottom:.3rem}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:.3rem;color:#fff;font-weight:600;font-size:.85rem}
.PASSED{background:#3a9a5b}.FAILED{background:#c0392b}.INCOMPLETE{background:#d9822b}.RUNNING{background:#2f6db5}
.EXCLUDED{background:#7f7f7f}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;font-size:.9rem}
th{background:#f4f4f4}pre{background:#f7f7f7;padding:.5rem;font-size:.8rem;overflow-x:auto;margin:.2rem 0}
.muted{color:#777;font-size:.85rem}svg{background:#fff}
"""


def render(doc: dict[str, Any]) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dsx certification: {escape(doc['name'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f'<h1>dsx certification: {escape(doc["name"])} <span class="badge {doc["result"]}">{doc["result"]}</span></h1>',
        _overview(doc),
        _failed_nodes(doc),
    ]
    for category in doc["categories"]:
        parts.append(_category(category))
    parts.append(_node_table(doc))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p) + "\n"


def _overview(doc: dict[str, Any]) -> str:
    totals = doc["totals"]
    rows = [
        ("Executor", doc["executor"]),
        ("Architecture", doc.get("architecture") or "—"),
        ("Nodes", totals["nodes"]),
        ("Excluded", totals["excluded"]),
        ("Workload runs", f"{totals['workloadRuns']} (+{totals['calibrationRuns']} calibration)"),
        ("Failed nodes", ", ".join(doc["failedNodes"]) or "none"),
    ]
    if doc.get("injections"):
        rows.append(("Injected faults", ", ".join(doc["injections"])))
    body = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _failed_nodes(doc: dict[str, Any]) -> str:
    failed = [n for n in doc["nodeResults"] if n["status"] != "PASSED"]
    if not failed:
        return "<p>Every targeted node passed every category.</p>"
    out = ["<h2>Nodes that did not pass</h2>"]
    for node in failed:
        detail = node.get("message") or node.get("exclusion", "")
        values = ""
        if node.get("measured") is not None and "measured" not in detail:
            values = f" — measured {node['measured']:.4g}, expected {_bound(node)}"
        out.append(
            f'<h3>{escape(node["name"])} <span class="badge {node["status"]}">{escape(node.get("reason", node["status"]))}</span></h3>'
            f"<p>{escape(detail)}{escape(values)}</p>"
        )
        if node.get("evidence"):
            out.append(f"<pre>{escape(chr(10).join(node['evidence']))}</pre>")
        if node.get("run"):
            out.append(f'<p class="muted">run {escape(node["run"])}</p>')
    return "\n".join(out)


def _bound(node: dict[str, Any]) -> str:
    expected = node.get("expected")
    return f"{expected:.4g}" if isinstance(expected, int | float) else escape(node.get("expression", "?"))


def _category(category: dict[str, Any]) -> str:
    out = [
        f'<h2>{escape(category["name"])} <span class="badge {category["status"]}">{category["status"]}</span></h2>',
        f'<p class="muted">{escape(category["description"])} Scale {escape(category["scale"])}; '
        f"{category['runs']} workload runs, {category['calibrationRuns']} calibration runs.</p>",
    ]
    if category["thresholds"]:
        rows = "".join(
            f"<tr><td>{escape(t['metric'])}</td><td><code>{escape(t['expression'])}</code></td><td>{escape(t['source'])}</td></tr>"
            for t in category["thresholds"]
        )
        out.append(f"<table><tr><th>metric</th><th>threshold</th><th>source</th></tr>{rows}</table>")
    if category.get("references"):
        refs = "; ".join(
            f"{size} rank(s): " + ", ".join(f"{m} {v:.4g}" for m, v in values.items())
            for size, values in category["references"].items()
        )
        out.append(f'<p class="muted">Local reference (calibration): {escape(refs)}</p>')
    if any(g.get("sizes") for g in category["groups"]):
        out.append("<h3>Bus bandwidth by message size</h3>")
        out.append(_bandwidth_chart(category))
    if any(g.get("nodeStepSeconds") for g in category["groups"]):
        out.append("<h3>Step time per node</h3>")
        out.append(_step_chart(category))
    group_rows: list[str] = []
    for group in category["groups"]:
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in group.get("metrics", {}).items()) or "—"
        failure = group.get("failure", {})
        group_rows.append(
            f"<tr><td>{escape(group['name'])}</td><td>{len(group['nodes'])}</td>"
            f'<td><span class="badge {group["status"]}">{group["status"]}</span></td><td>{escape(metrics)}</td>'
            f"<td>{escape(failure.get('message', ''))}</td></tr>"
        )
    out.append(
        "<table><tr><th>group</th><th>nodes</th><th>status</th><th>measured</th><th>failure</th></tr>"
        + "".join(group_rows)
        + "</table>"
    )
    if category.get("isolation"):
        out.append(_isolation(category["isolation"]))
    return "\n".join(out)


def _bandwidth_chart(category: dict[str, Any]) -> str:
    series = [
        (g["name"], [(p["sizeBytes"], p["busBandwidthGbps"]) for p in g.get("sizes", [])]) for g in category["groups"]
    ]
    series = [(n, pts) for n, pts in series if pts]
    width, height, left, bottom, top, right = 640, 300, 60, 40, 15, 150
    xs = [math.log2(s) for _, pts in series for s, _ in pts]
    ys = [v for _, pts in series for _, v in pts]
    bound = _plain_bound(category)
    if bound is not None:
        ys.append(bound)
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y1 = max(ys) * 1.1 if ys and max(ys) > 0 else 1.0

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def py(y: float) -> float:
        return height - bottom - y / y1 * (height - bottom - top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="bus bandwidth by message size">'
    ]
    parts.append(_axes(width, height, left, bottom, top, right))
    for tick in range(math.ceil(x0), math.floor(x1) + 1, max(1, math.ceil((x1 - x0) / 6))):
        parts.append(
            f'<text x="{px(tick):.1f}" y="{height - bottom + 16}" font-size="11" text-anchor="middle">{_size(2**tick)}</text>'
        )
    for i in range(5):
        value = y1 * i / 4
        parts.append(
            f'<text x="{left - 6}" y="{py(value) + 4:.1f}" font-size="11" text-anchor="end">{value:.3g}</text>'
        )
    parts.append(
        f'<text x="14" y="{(height - bottom) / 2:.0f}" font-size="11" transform="rotate(-90 14 {(height - bottom) / 2:.0f})" text-anchor="middle">busbw GB/s</text>'
    )
    if bound is not None:
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{py(bound):.1f}" y2="{py(bound):.1f}" stroke="{_FAIL}" stroke-dasharray="5,4"/>'
        )
        parts.append(
            f'<text x="{width - right + 4}" y="{py(bound) + 4:.1f}" font-size="11" fill="{_FAIL}">threshold</text>'
        )
    for index, (name, points) in enumerate(series):
        color = _PALETTE[index % len(_PALETTE)]
        path = " ".join(f"{px(math.log2(s)):.1f},{py(v):.1f}" for s, v in points)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for s, v in points:
            parts.append(f'<circle cx="{px(math.log2(s)):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"/>')
        parts.append(
            f'<text x="{width - right + 4}" y="{top + 14 * (index + 1)}" font-size="11" fill="{color}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _plain_bound(category: dict[str, Any]) -> float | None:
    for threshold in category["thresholds"]:
        if threshold["metric"] != "busBandwidthGbps":
            continue
        text = threshold["expression"].replace(" ", "")
        if text.startswith("value>="):
            try:
                return float(text.removeprefix("value>="))
            except ValueError:
                pass
        if "reference" in text and category.get("references"):
            sizes = sorted(category["references"], key=int)
            factor = text.removeprefix("value>=").removesuffix("*reference")
            try:
                reference = category["references"][sizes[-1]].get("busBandwidthGbps")
                return float(factor) * reference if reference is not None else None
            except ValueError:
                return None
    return None


def _step_chart(category: dict[str, Any]) -> str:
    bars = sorted((n, v) for g in category["groups"] for n, v in g.get("nodeStepSeconds", {}).items())
    width, row = 640, 22
    height = 30 + row * len(bars)
    peak = max((v for _, v in bars), default=1.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="step time per node">'
    ]
    for index, (node, seconds) in enumerate(bars):
        y = 10 + index * row
        length = seconds / peak * (width - 220)
        parts.append(f'<text x="4" y="{y + 14}" font-size="12">{escape(node)}</text>')
        parts.append(f'<rect x="110" y="{y + 3}" width="{length:.1f}" height="{row - 6}" fill="{_PALETTE[0]}"/>')
        parts.append(f'<text x="{114 + length:.1f}" y="{y + 14}" font-size="11">{seconds * 1e3:.1f} ms</text>')
    parts.append("</svg>")
    return "".join(parts)


def _isolation(iso: dict[str, Any]) -> str:
    tree = iso["tree"]
    depth: dict[int, int] = {}
    for probe in tree:
        parent = probe["parent"]
        depth[probe["index"]] = 0 if parent is None else depth.get(parent, 0) + 1
    row, width = 20, 900
    height = 10 + row * len(tree)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="fault isolation tree">'
    ]
    position = {p["index"]: i for i, p in enumerate(tree)}
    for i, probe in enumerate(tree):
        x, y = 10 + depth[probe["index"]] * 22, 5 + i * row
        parent = probe["parent"]
        if parent is not None and parent in position:
            px, py = 10 + depth[parent] * 22 + 5, 5 + position[parent] * row + 10
            parts.append(f'<path d="M{px},{py} V{y + 10} H{x}" fill="none" stroke="#bbb"/>')
        color = _PASS if probe["passed"] else _FAIL
        fill = "#fff" if probe.get("inferred") else color
        parts.append(
            f'<rect x="{x}" y="{y + 4}" width="12" height="12" rx="2" fill="{fill}" stroke="{color}" stroke-width="2"/>'
        )
        nodes = probe["nodes"]
        shown = ", ".join(nodes) if len(nodes) <= 6 else f"{nodes[0]} … {nodes[-1]} ({len(nodes)} nodes)"
        note = " (inferred)" if probe.get("inferred") else ""
        extra = f" — {probe['reason']}" if probe.get("reason") else ""
        parts.append(
            f'<text x="{x + 18}" y="{y + 15}" font-size="12">{escape(probe["stage"])}: {escape(shown)}'
            f"{escape(note)}{escape(extra)}</text>"
        )
    parts.append("</svg>")
    faults = "".join(
        f"<li>between {escape(', '.join(f['groupA']))} and {escape(', '.join(f['groupB']))}"
        f"{' (whole boundary)' if f['wholeBoundary'] else ''}</li>"
        for f in iso["infrastructureFaults"]
    )
    bound = f", budget k·⌈log2(N/k)⌉+2k = {iso['bound']}" if iso.get("bound") else ""
    head = (
        f"<h3>Fault isolation</h3><p>{iso['runs']} runs in {iso['rounds']} rounds{bound}; confirmed faulty: "
        f"{escape(', '.join(iso['confirmedFaulty']) or 'none')}"
        + (f"; unresolved: {escape(', '.join(iso['unresolved']))}" if iso["unresolved"] else "")
        + "</p>"
    )
    if faults:
        head += f"<p>Link or infrastructure faults (not attributed to nodes):</p><ul>{faults}</ul>"
    return head + "".join(parts)


def _node_table(doc: dict[str, Any]) -> str:
    rows = "".join(
        f'<tr><td>{escape(n["name"])}</td><td><span class="badge {n["status"]}">{n["status"]}</span></td>'
        f"<td>{escape(n.get('reason', ''))}</td><td>{escape(n.get('group', ''))}</td></tr>"
        for n in doc["nodeResults"]
    )
    return f"<h2>All nodes</h2><table><tr><th>node</th><th>status</th><th>reason</th><th>group</th></tr>{rows}</table>"


def _axes(width: int, height: int, left: int, bottom: int, top: int, right: int) -> str:
    return (
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#444"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#444"/>'
    )


def _size(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size // scale}{unit}"
    return f"{size}B"
