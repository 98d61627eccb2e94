"""The certification report as one self-contained HTML page: no scripts, fonts or network.

Every chart is inline SVG drawn here from the report document, and shows the metric the
category is judged on (algorithm bandwidth for one-rank loopback, whose bus bandwidth is 0 by
definition; step time for training) with the threshold it was held to:

- per message size, one line per group, the threshold as a dashed line (collectives);
- per node, the value of the run that says most about the node (for a data-parallel job, whose
  ranks step in lock-step, that is the smallest isolation run: where the slow node shows);
- the fault-isolation tree, one row per run with its value (inferred results are hollow).

Axes use round 1-2-5 steps. Failed nodes come with their reason, measured and expected values
and the log lines that show it.
"""

# ruff: noqa: E501  (SVG and HTML markup reads better on one line)
from __future__ import annotations

import math
from datetime import datetime
from html import escape
from typing import Any

from dsx.certify.reports import judged as judged_runs
from dsx.model import certification as model

_PALETTE = ("#2f6db5", "#d9822b", "#3a9a5b", "#8e5bb5", "#1a9aa0", "#b5a22f", "#7f7f7f", "#c05f9a")
_PASS, _FAIL, _THRESHOLD = "#3a9a5b", "#c0392b", "#c0392b"
_CHAR_PX = 6.6
"""Width of one character at font-size 11 (system sans): sizes margins so labels never overlap."""

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem;color:#222;max-width:1100px}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin-bottom:.3rem}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:.3rem;color:#fff;font-weight:600;font-size:.85rem}
.PASSED{background:#3a9a5b}.FAILED{background:#c0392b}.INCOMPLETE{background:#d9822b}.RUNNING{background:#2f6db5}
.EXCLUDED{background:#7f7f7f}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;font-size:.9rem}
th{background:#f4f4f4}pre{background:#f7f7f7;padding:.5rem;font-size:.8rem;overflow-x:auto;margin:.2rem 0}
.muted{color:#777;font-size:.85rem}.fail{color:#c0392b;font-weight:600}svg{background:#fff;display:block}.name,.num{white-space:nowrap}.num{text-align:right}
"""


def render(doc: dict[str, Any]) -> str:
    title = "dsx certification report" + (f": {doc['name']}" if doc["name"] != "certification" else "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f'<h1>{escape(title)} <span class="badge {doc["result"]}">{doc["result"]}</span></h1>',
        _byline(doc),
        _overview(doc),
        _failed_nodes(doc),
    ]
    for category in doc["categories"]:
        parts.append(_category(doc, category))
    parts.append(_node_table(doc))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p) + "\n"


def _byline(doc: dict[str, Any]) -> str:
    """When, how long, which dsx and which cluster: the line a reader of a forwarded report needs first."""
    items = []
    if doc.get("startedAt"):
        started = datetime.fromisoformat(doc["startedAt"].replace("Z", "+00:00"))
        items.append(started.strftime("%Y-%m-%d %H:%M UTC"))
    items.append(f"took {_duration(doc['totals']['durationSeconds'])}")
    if doc.get("cluster"):
        items.append(f"cluster {doc['cluster']}")
    items.append(f"dsx {doc.get('dsxVersion', '?')}")
    return f'<p class="muted">{escape(" · ".join(items))}</p>'


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


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


def _category(doc: dict[str, Any], category: dict[str, Any]) -> str:
    metrics = judged_runs.metrics(category)
    out = [
        f'<h2>{escape(category["name"])} <span class="badge {category["status"]}">{category["status"]}</span></h2>',
        f'<p class="muted">{escape(category["description"])} Scale {escape(category["scale"])}; '
        f"{category['runs']} workload runs, {category['calibrationRuns']} calibration runs.</p>",
    ]
    if category.get("ran"):
        fabric = f" on {category['fabric']}" if category.get("fabric") else ""
        out.append(f'<p class="muted">Ran {escape(category["ran"])}{escape(fabric)}.</p>')
    if category.get("lacking"):
        out.append(f'<p class="muted">{escape(category["lacking"])}.</p>')
    if category.get("commonCause"):
        out.append(f'<p class="fail">{escape(category["commonCause"]["message"])}</p>')
    if category["thresholds"]:
        rows = "".join(
            f"<tr><td>{escape(_metric_name(t['metric']))}</td><td><code>{escape(t['expression'])}</code></td>"
            f"<td>{escape(_resolved(doc, category, t['metric']))}</td><td>{escape(t.get('measuredOn', 'relative'))}</td>"
            f"<td>{escape(t['source'])}</td></tr>"
            for t in category["thresholds"]
        )
        out.append(
            "<table><tr><th>judged on</th><th>threshold</th><th>bound</th><th>measured on</th><th>source</th></tr>"
            f"{rows}</table>"
        )
    if category.get("references"):
        refs = "; ".join(
            f"{size} rank(s): "
            + ", ".join(_metric_value(m, v) for m, v in values.items() if m in {x.value for x in metrics})
            for size, values in category["references"].items()
        )
        out.append(f'<p class="muted">Local reference (calibration): {escape(refs)}</p>')
    bandwidth = next((m for m in metrics if m.unit == "GB/s"), None)
    if bandwidth is not None and any(g.get("sizes") for g in category["groups"]):
        out.append(f"<h3>{escape(bandwidth.label.capitalize())} by message size</h3>")
        out.append(_size_chart(doc, category, bandwidth))
    for metric in metrics:
        chosen = judged_runs.per_node(category, metric)
        if chosen:
            out.append(f"<h3>{escape(metric.label.capitalize())} per node</h3>")
            out.append(
                '<p class="muted">Each node shows the run that says most about it: the smallest one, '
                "agreeing with its verdict. Red: that run failed; the dashed mark is the bound it was held to.</p>"
            )
            out.append(_node_chart(doc, category, metric, chosen))
    group_rows: list[str] = []
    for group in category["groups"]:
        values = group.get("metrics", {})
        shown = ", ".join(f"{m.label} {m.with_unit(values[m.value])}" for m in metrics if m.value in values) or "—"
        failure = group.get("failure", {})
        group_rows.append(
            f'<tr><td class="name">{escape(group["name"])}</td><td class="num">{len(group["nodes"])}</td>'
            f'<td><span class="badge {group["status"]}">{group["status"]}</span></td><td class="name">{escape(shown)}</td>'
            f"<td>{escape(failure.get('message', ''))}</td></tr>"
        )
    out.append(
        "<table><tr><th>group</th><th>nodes</th><th>status</th><th>measured</th><th>failure</th></tr>"
        + "".join(group_rows)
        + "</table>"
    )
    if category.get("isolation"):
        out.append(_isolation(category))
    return "\n".join(out)


def _metric_name(key: str) -> str:
    return f"{model.Metric(key).label} ({key})" if key in judged_runs.KNOWN else key


def _metric_value(key: str, value: float) -> str:
    return (
        f"{model.Metric(key).label} {model.Metric(key).with_unit(value)}"
        if key in judged_runs.KNOWN
        else f"{key} {value:.4g}"
    )


def _resolved(doc: dict[str, Any], category: dict[str, Any], key: str) -> str:
    """The bound as a number with its unit, as the screening groups were held to it."""
    if key not in judged_runs.KNOWN:
        return "—"
    metric = model.Metric(key)
    found = sorted({b for g in category["groups"] if (b := judged_runs.bound(category, metric, g)) is not None})
    op = judged_runs.comparison(category, metric)
    if not found:
        return "—"
    if len(found) == 1:
        return f"{op} {metric.with_unit(found[0])}"
    return f"{op} {metric.with_unit(found[0])} … {metric.with_unit(found[-1])} (per group)"


# --- charts ----------------------------------------------------------------------------------


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 … ≥ `top` in 1-2-5 steps, about `count` of them."""
    if not math.isfinite(top) or top <= 0:
        top = 1.0
    raw = top / count
    base = 10.0 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw * (1 - 1e-9))
    return [round(i * step, 12) for i in range(math.ceil(top / step - 1e-9) + 1)]


def tick_label(value: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{value:.{decimals}f}"


def _size_chart(doc: dict[str, Any], category: dict[str, Any], metric: model.Metric) -> str:
    """The judged bandwidth per message size, one line per group, the threshold dashed."""
    series = [
        (g, [(p["sizeBytes"], p[metric.value]) for p in g.get("sizes", []) if metric.value in p])
        for g in category["groups"]
    ]
    series = [(g, pts) for g, pts in series if pts]
    if not series:
        return ""
    sizes = sorted({s for _, pts in series for s, _ in pts})
    bounds = sorted({b for g, _ in series if (b := judged_runs.bound(category, metric, g)) is not None})
    values = [metric.shown(v) for _, pts in series for _, v in pts] + [metric.shown(b) for b in bounds]
    ticks = nice_ticks(max(values, default=1.0) * 1.05)
    labels = [tick_label(t, ticks) for t in ticks]
    legend = [_legend(g) for g, _ in series] + ["threshold"]
    left = 34 + round(_CHAR_PX * max(len(x) for x in labels))
    right = 30 + round(_CHAR_PX * max(len(x) for x in legend))
    width, height, bottom, top = 760, 300, 44, 12
    x0, x1 = math.log2(sizes[0]), math.log2(sizes[-1])
    span = (x1 - x0) or 1.0

    def px(size: int) -> float:
        return (
            left
            + (math.log2(size) - x0) / span * (width - left - right - 20)
            + (10 if x1 > x0 else (width - left - right) / 2)
        )

    def py(value: float) -> float:
        return height - bottom - value / ticks[-1] * (height - bottom - top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(metric.label)} by message size" data-metric="{metric.value}">',
        _axes(width, height, left, bottom, top, right),
    ]
    for tick, label in zip(ticks, labels, strict=True):
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" font-size="11" text-anchor="end">{label}</text>')
    for size in sizes:
        parts.append(
            f'<text x="{px(size):.1f}" y="{height - bottom + 16}" font-size="11" text-anchor="middle">{_size(size)}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2:.0f}" y="{height - 8}" font-size="11" text-anchor="middle">message size (bytes)</text>'
    )
    middle = (height - bottom + top) / 2
    parts.append(
        f'<text x="12" y="{middle:.0f}" font-size="11" transform="rotate(-90 12 {middle:.0f})" text-anchor="middle">'
        f"{escape(metric.label)} ({metric.unit})</text>"
    )
    for bound in bounds:
        y = py(metric.shown(bound))
        parts.append(
            f'<line class="threshold" data-value="{metric.shown(bound):.6g}" x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{_THRESHOLD}" stroke-width="1.5" stroke-dasharray="6,4"/>'
        )
    for index, (group, points) in enumerate(series):
        color = _PALETTE[index % len(_PALETTE)]
        path = " ".join(f"{px(s):.1f},{py(metric.shown(v)):.1f}" for s, v in points)
        parts.append(
            f'<polyline class="series" data-group="{escape(group["name"])}" data-points="{len(points)}" fill="none" '
            f'stroke="{color}" stroke-width="{2 if group["status"] == "PASSED" else 3.5}" points="{path}"/>'
        )
        for s, v in points:
            parts.append(f'<circle cx="{px(s):.1f}" cy="{py(metric.shown(v)):.1f}" r="3" fill="{color}"/>')
    for index, name in enumerate(legend):
        y = top + 6 + 16 * index
        x = width - right + 12
        if name == "threshold":
            parts.append(
                f'<line x1="{x}" x2="{x + 14}" y1="{y}" y2="{y}" stroke="{_THRESHOLD}" stroke-width="1.5" stroke-dasharray="4,3"/>'
            )
        else:
            parts.append(f'<rect x="{x}" y="{y - 5}" width="14" height="10" fill="{_PALETTE[index % len(_PALETTE)]}"/>')
        parts.append(f'<text x="{x + 19}" y="{y + 4}" font-size="11">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _legend(group: dict[str, Any]) -> str:
    mark = "" if group["status"] == "PASSED" else " ✗"
    count = len(group["nodes"])
    return str(group["name"]) + (f" ({count} nodes)" if count > 1 else "") + mark


def _node_chart(
    doc: dict[str, Any], category: dict[str, Any], metric: model.Metric, chosen: dict[str, judged_runs.Run]
) -> str:
    """One bar per node: the value of its most telling run, red when that run failed, its bound dashed."""
    rows = []
    for node, run in chosen.items():
        bound = judged_runs.bound(category, metric, {"bounds": run.bounds})
        where = ", ".join(run.nodes) if len(run.nodes) <= 3 else f"{run.name} ({len(run.nodes)} nodes)"
        rows.append(
            (
                node,
                metric.shown(run.metrics[metric.value]),
                None if bound is None else metric.shown(bound),
                run.passed,
                where,
            )
        )
    ticks = nice_ticks(max([v for _, v, _, _, _ in rows] + [b for *_, b, _, _ in rows if b is not None]) * 1.05)
    label_px = 12 + round(7.2 * max(len(n) for n, *_ in rows))
    note_px = 24 + round(_CHAR_PX * max(len(f"{v:.3g} {metric.unit}  in {w}") for _, v, _, _, w in rows))
    row, top, bottom = 22, 8, 40
    width = max(760, label_px + 360 + note_px)
    plot = width - label_px - note_px
    height = top + row * len(rows) + bottom

    def px(value: float) -> float:
        return label_px + value / ticks[-1] * plot

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(metric.label)} per node" data-metric="{metric.value}">'
    ]
    base = top + row * len(rows)
    for tick in ticks:
        parts.append(f'<line x1="{px(tick):.1f}" x2="{px(tick):.1f}" y1="{top}" y2="{base}" stroke="#eee"/>')
        parts.append(
            f'<text x="{px(tick):.1f}" y="{base + 15}" font-size="11" text-anchor="middle">{tick_label(tick, ticks)}</text>'
        )
    parts.append(f'<line x1="{label_px}" x2="{label_px + plot}" y1="{base}" y2="{base}" stroke="#444"/>')
    parts.append(
        f'<text x="{label_px + plot / 2:.0f}" y="{height - 6}" font-size="11" text-anchor="middle">{escape(metric.label)} ({metric.unit})</text>'
    )
    for index, (node, value, bound, passed, where) in enumerate(rows):
        y = top + index * row
        color = _PASS if passed else _FAIL
        parts.append(f'<text x="{label_px - 8}" y="{y + 15}" font-size="12" text-anchor="end">{escape(node)}</text>')
        parts.append(
            f'<rect class="bar" data-node="{escape(node)}" data-value="{value:.6g}" x="{label_px}" y="{y + 4}" '
            f'width="{max(px(value) - label_px, 1):.1f}" height="{row - 8}" fill="{color}"/>'
        )
        if bound is not None:
            parts.append(
                f'<line class="threshold" data-value="{bound:.6g}" x1="{px(bound):.1f}" x2="{px(bound):.1f}" y1="{y + 1}" y2="{y + row - 1}" '
                f'stroke="{_THRESHOLD}" stroke-width="2" stroke-dasharray="3,2"/>'
            )
        parts.append(
            f'<text x="{label_px + plot + 8}" y="{y + 15}" font-size="11">{value:.3g} {escape(metric.unit)}'
            f'<tspan fill="#777">  in {escape(where)}</tspan></text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _isolation(category: dict[str, Any]) -> str:
    iso = category["isolation"]
    judged = judged_runs.metrics(category)
    tree = iso["tree"]
    depth: dict[int, int] = {}
    for probe in tree:
        parent = probe["parent"]
        depth[probe["index"]] = 0 if parent is None else depth.get(parent, 0) + 1
    row = 20
    width = 1000
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
        values = probe.get("metrics", {})
        measured = "".join(f" — {m.label} {m.with_unit(values[m.value])}" for m in judged if m.value in values)
        extra = measured + (f" — {probe['reason']}" if probe.get("reason") else "")
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
        f'<tr><td class="name">{escape(n["name"])}</td><td><span class="badge {n["status"]}">{n["status"]}</span></td>'
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
