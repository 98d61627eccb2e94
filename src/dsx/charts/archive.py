"""Turn a packaged Helm chart (.tgz) into the dsx chart-cache layout.

Only what the lint reads is kept: `values.yaml`, `values.schema.json`, `Chart.yaml`, the
`.Values` paths the templates read (`values-refs.txt`), the subchart keys (`subcharts.txt`) and
each subchart in the same layout under `charts/<key>/`. Archives are read in memory with size
and depth limits; nothing is extracted by name onto disk, so a hostile archive cannot write
outside the cache.
"""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from dsx import atomic
from dsx.errors import BadInputError
from dsx.lint import chart as chart_data

MAX_UNPACKED_BYTES = 64 * 1024 * 1024
"""A chart with more than this much content is refused (real charts are well under 5 MiB)."""

MAX_SUBCHART_DEPTH = 4
"""Subcharts nest; deeper than this is refused as a likely archive bomb."""

_SUBCHART_ARCHIVE = re.compile(r"^charts/([^/]+)\.tgz$")
_SUBCHART_FILE = re.compile(r"^charts/([^/]+)/(.+)$")


def unpack_chart(data: bytes, *, source: str) -> dict[str, bytes]:
    """The files of a chart archive, relative to the chart's own directory."""
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                parts = PurePosixPath(member.name.removeprefix("./")).parts
                if len(parts) < 2 or ".." in parts or member.name.startswith("/"):
                    continue
                total += member.size
                if total > MAX_UNPACKED_BYTES:
                    raise BadInputError(f"{source}: chart archive unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                handle = tar.extractfile(member)
                if handle is not None:
                    files["/".join(parts[1:])] = handle.read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BadInputError(f"{source}: not a readable chart archive: {exc}") from exc
    if "Chart.yaml" not in files:
        raise BadInputError(f"{source}: not a Helm chart (no Chart.yaml in the archive)")
    return files


def cache_layout(files: Mapping[str, bytes], *, source: str, depth: int = 0) -> dict[str, bytes]:
    """The dsx cache files (path → bytes) for one unpacked chart, subcharts included."""
    if depth > MAX_SUBCHART_DEPTH:
        raise BadInputError(f"{source}: subcharts nested deeper than {MAX_SUBCHART_DEPTH}")
    chart_yaml = chart_data.parse_yaml_fast(_text(files["Chart.yaml"], source), source=f"{source}: Chart.yaml") or {}
    if not isinstance(chart_yaml, dict):
        raise BadInputError(f"{source}: Chart.yaml must be a mapping")
    out: dict[str, bytes] = {
        chart_data.CHART_FILE: files["Chart.yaml"],
        chart_data.VALUES_FILE: files.get("values.yaml", b"{}\n"),
    }
    if "values.schema.json" in files:
        out[chart_data.SCHEMA_FILE] = files["values.schema.json"]
    templates = [
        data.decode("utf-8", "replace") for path, data in sorted(files.items()) if path.startswith("templates/")
    ]
    refs = chart_data.values_refs_from_templates(templates)
    out[chart_data.REFS_FILE] = chart_data.format_refs_text(refs).encode()

    keys_by_chart = chart_data.dependency_keys(chart_yaml)
    declared = [key for names in keys_by_chart.values() for key in names]
    vendored: list[str] = []
    for sub_files in _subcharts(files, source=source, depth=depth).values():
        sub_chart = chart_data.parse_yaml_fast(_text(sub_files["Chart.yaml"], source), source=source) or {}
        sub_name = str(sub_chart.get("name", "")) if isinstance(sub_chart, dict) else ""
        if not sub_name:
            continue
        layout = cache_layout(sub_files, source=f"{source}: subchart {sub_name}", depth=depth + 1)
        for key in keys_by_chart.get(sub_name, [sub_name]):
            vendored.append(key)
            for path, data in layout.items():
                out[f"{chart_data.SUBCHART_DIR}/{key}/{path}"] = data
    keys = list(dict.fromkeys([*declared, *vendored]))
    out[chart_data.SUBCHARTS_FILE] = "".join(f"{k}\n" for k in keys).encode()
    return out


def _subcharts(files: Mapping[str, bytes], *, source: str, depth: int) -> dict[str, dict[str, bytes]]:
    """Subcharts shipped in `charts/`, packaged (`charts/x.tgz`) or unpacked (`charts/x/…`)."""
    found: dict[str, dict[str, bytes]] = {}
    for path, data in sorted(files.items()):
        packed = _SUBCHART_ARCHIVE.match(path)
        if packed:
            found[packed.group(1)] = unpack_chart(data, source=f"{source}: {path}")
            continue
        loose = _SUBCHART_FILE.match(path)
        if loose:
            found.setdefault(loose.group(1), {})[loose.group(2)] = data
    return {name: sub for name, sub in found.items() if "Chart.yaml" in sub}


def _text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{source}: chart file is not UTF-8 text") from exc


def write_cache(target: Path, files: Mapping[str, bytes]) -> None:
    """Replace `target` with `files` in one rename, so a crash never leaves a half-written chart."""
    atomic.write_folder(target, files)
