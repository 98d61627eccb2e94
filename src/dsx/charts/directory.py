"""Reading a chart directory into `ChartData`, and keeping what it read between runs.

A chart directory is either the dsx cache layout (`values.yaml`, `Chart.yaml`, optional
`values.schema.json`, `values-refs.txt` with one `.Values` path per line, `subcharts.txt` with
one subchart values key per line, `charts/<key>/` holding subchart data in the same layout) or an
unpacked Helm chart (`templates/` is scanned for `.Values.` paths, subcharts come from `charts/`
and the `Chart.yaml` dependencies). Both read into the same `ChartData` (`dsx.lint.chart`, which
holds the data type and the text parsers; the files are read here, in the adapter tier).

With a `parsed_dir`, `load` keeps what a directory read into as a `dsx.marshal_cache` file keyed
by a hash of every file in the directory, so the next process skips parsing its values (~25 ms of
`dsx bundle`'s lint for the packaged charts) until any file of it changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError
from dsx.files import documents
from dsx.lint import chart as chart_data

PARSED_VERSION = 1
"""Shape of the kept data (`chart_data.as_plain`); bumped when it changes, so older files are a miss."""


def load(directory: Path, *, name: str, version: str, origin: str, parsed_dir: Path | None) -> chart_data.ChartData:
    """`load_chart_dir`, through the files kept in `parsed_dir` when there is one."""
    if parsed_dir is None:
        return load_chart_dir(directory, name=name, version=version, origin=origin)
    from dsx import marshal_cache

    folder = str(parsed_dir)
    # one file per directory and reading of it; the key changes with any file in the directory
    stem = hashlib.sha256(f"{directory.resolve()}\0{name}\0{version}\0{origin}".encode()).hexdigest()[:16]
    key = marshal_cache.tree_digest(str(directory), code=_READER_CODE)
    kept = marshal_cache.read(folder, stem, key, version=PARSED_VERSION) if key is not None else None
    if isinstance(kept, dict):
        return chart_data.from_plain(kept)
    loaded = load_chart_dir(directory, name=name, version=version, origin=origin)
    if key is not None and marshal_cache.tree_digest(str(directory), code=_READER_CODE) == key:
        # kept only when no file changed while it was read (a fetch may replace the folder meanwhile)
        marshal_cache.write(folder, stem, key, chart_data.as_plain(loaded), version=PARSED_VERSION)
    return loaded


_READER_CODE = tuple(
    str(Path(__file__).resolve().parents[1] / part)
    for part in ("lint/chart.py", "charts/directory.py", "serialization.py")
)
"""The code that turns a chart directory into `ChartData`: a dsx that reads charts differently misses."""


def load_chart_dir(directory: Path, *, name: str, version: str, origin: str) -> chart_data.ChartData:
    """Read one chart directory (cache layout or unpacked chart); BadInputError names a broken file."""
    values_path = directory / chart_data.VALUES_FILE
    values_text = documents.read_text(values_path, max_bytes=chart_data.CHART_LIMITS.max_bytes)
    defaults = chart_data.parse_yaml_fast(values_text, source=str(values_path)) or {}
    if not isinstance(defaults, dict):
        raise BadInputError(f"{values_path}: expected a mapping at the top level")
    schema = _load_schema(directory / chart_data.SCHEMA_FILE)
    chart_yaml = _load_chart_yaml(directory / chart_data.CHART_FILE)

    refs_path = directory / chart_data.REFS_FILE
    if refs_path.is_file():
        refs = chart_data.parse_refs_text(documents.read_text(refs_path))
    else:
        templates = sorted(p for p in (directory / chart_data.TEMPLATES_DIR).rglob("*") if p.is_file())
        refs = chart_data.values_refs_from_templates(documents.read_text(p) for p in templates)
    refs |= chart_data.condition_refs(chart_yaml)

    subcharts, subchart_dirs = _subcharts_of(directory, chart_yaml)
    subchart_data = {
        key: load_chart_dir(path, name=key, version="", origin=f"{origin} (subchart {key})")
        for key, path in subchart_dirs.items()
    }
    known = chart_data.key_paths(defaults) | set(refs)
    return chart_data.ChartData(
        name=name,
        version=version,
        defaults=defaults,
        values_refs=refs,
        schema=schema,
        subcharts=subcharts,
        subchart_data=subchart_data,
        deprecations=chart_data.deprecations_from_values_text(values_text, known),
        origin=origin,
    )


def _subcharts_of(directory: Path, chart_yaml: Mapping[str, Any]) -> tuple[tuple[str, ...], dict[str, Path]]:
    """Subchart values keys, and the directory holding each one's data where there is one.

    In the cache layout `charts/<key>/` is already named by the values key; in an unpacked
    chart `charts/<chart-name>/` is found under every alias the dependencies give it.
    """
    sub_root = directory / chart_data.SUBCHART_DIR
    present = (
        sorted(p for p in sub_root.iterdir() if (p / chart_data.VALUES_FILE).is_file()) if sub_root.is_dir() else []
    )
    listing = directory / chart_data.SUBCHARTS_FILE
    if listing.is_file():
        keys = [line.strip() for line in documents.read_text(listing).splitlines() if line.strip()]
        dirs = {p.name: p for p in present}
    else:
        aliases = chart_data.dependency_keys(chart_yaml)
        keys = [key for names in aliases.values() for key in names]
        dirs = {}
        for path in present:
            sub_chart = _load_chart_yaml(path / chart_data.CHART_FILE)
            for key in aliases.get(str(sub_chart.get("name") or path.name), [path.name]):
                dirs[key] = path
    return tuple(dict.fromkeys([*keys, *dirs])), dirs


def _load_schema(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    schema = serialization.parse_json(
        documents.read_text(path, max_bytes=chart_data.CHART_LIMITS.max_bytes),
        source=str(path),
        limits=chart_data.CHART_LIMITS,
    )
    if not isinstance(schema, dict):
        raise BadInputError(f"{path}: a values schema must be a JSON object")
    return schema


def _load_chart_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = documents.load_yaml_file(path, limits=chart_data.CHART_LIMITS) or {}
    return data if isinstance(data, dict) else {}
