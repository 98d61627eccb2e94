"""Area of concern: reading chart data — template refs, deprecation comments, unpacked charts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsx.charts import directory as chart_directory
from dsx.charts import sources
from dsx.errors import BadInputError
from dsx.lint import chart
from dsx.lint.chart import split_path
from dsx.model.recipe import ComponentRef


def test_template_refs_cover_dot_dollar_and_index_forms() -> None:
    template = """
    replicas: {{ .Values.replicaCount }}
    {{- with $.Values.image.pullSecrets }}{{ toYaml . }}{{ end }}
    enabled: {{ (index .Values "node-feature-discovery" "enabled") }}
    {{ if .Values.a_b.c1 }}x{{ end }}
    """

    refs = chart.values_refs_from_templates([template])

    assert refs == {
        ("replicaCount",),
        ("image", "pullSecrets"),
        ("node-feature-discovery", "enabled"),
        ("a_b", "c1"),
    }


def test_a_deprecation_block_above_a_commented_key_names_its_replacement() -> None:
    text = """driver:
  kernelModuleType: "auto"

  # NOTE: useOpenKernelModules has been deprecated and made no-op. Please use kernelModuleType instead.
  # useOpenKernelModules: false
  usePrecompiled: false
"""
    known = {split_path("driver"), split_path("driver.kernelModuleType"), split_path("driver.usePrecompiled")}

    found = chart.deprecations_from_values_text(text, known)

    assert list(found) == [("driver", "useOpenKernelModules")]
    assert found[("driver", "useOpenKernelModules")].replacement == ("driver", "kernelModuleType")


def test_a_comment_that_mentions_noop_about_something_else_is_not_a_deprecation() -> None:
    text = """# Level 2:
# - Kubelet plugins:
#   - Acknowledge when Unprepare is a noop
logVerbosity: "4"
"""

    assert chart.deprecations_from_values_text(text, {("logVerbosity",)}) == {}


def test_an_inline_deprecation_comment_marks_its_key() -> None:
    text = "image:\n  legacyTag: v1  # Deprecated, replaced by image.tag\n  tag: v1\n"

    found = chart.deprecations_from_values_text(text, {("image",), ("image", "tag"), ("image", "legacyTag")})

    assert found[("image", "legacyTag")].replacement == ("image", "tag")


def test_an_unpacked_helm_chart_reads_like_the_cache_layout(tmp_path: Path) -> None:
    root = tmp_path / "mychart"
    (root / "templates").mkdir(parents=True)
    (root / "charts" / "redis").mkdir(parents=True)
    (root / "Chart.yaml").write_text(
        "apiVersion: v2\nname: mychart\nversion: 1.0.0\n"
        "dependencies:\n  - name: redis\n    alias: cache\n    condition: cache.enabled\n  - name: pg\n"
    )
    (root / "values.yaml").write_text("image:\n  tag: v1\n")
    (root / "templates" / "deploy.yaml").write_text("image: {{ .Values.image.tag }}:{{ .Values.image.digest }}\n")
    (root / "charts" / "redis" / "values.yaml").write_text("port: 6379\n")
    (root / "charts" / "redis" / "Chart.yaml").write_text("apiVersion: v2\nname: redis\nversion: 18.0.0\n")

    data = chart_directory.load_chart_dir(root, name="mychart", version="1.0.0", origin="test")

    assert data.values_refs == {("image", "tag"), ("image", "digest"), ("cache", "enabled")}
    assert data.subcharts == ("cache", "pg")
    assert set(data.subchart_data) == {"cache"}
    assert data.subchart_data["cache"].defaults == {"port": 6379}


def test_a_broken_values_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text("a: [unclosed\n")

    with pytest.raises(BadInputError, match=r"values\.yaml: malformed YAML"):
        chart_directory.load_chart_dir(tmp_path, name="x", version="1", origin="test")


def test_every_packaged_chart_and_an_unpacked_one_survive_the_parsed_cache_unchanged(tmp_path: Path) -> None:
    """`as_plain` → marshal → `from_plain` gives back exactly what reading the directory gave."""
    import marshal

    test_an_unpacked_helm_chart_reads_like_the_cache_layout(tmp_path)  # a chart with a subchart
    (tmp_path / "mychart" / "values.yaml").write_text("image:\n  old: v1  # Deprecated, replaced by image.tag\n")
    packaged = sorted(p.parent for p in sources.packaged_charts().glob("*/*/values.yaml"))
    assert len(packaged) >= 4
    read = [chart_directory.load_chart_dir(d, name=d.parent.name, version=d.name, origin="t") for d in packaged]
    read.append(chart_directory.load_chart_dir(tmp_path / "mychart", name="mychart", version="1.0.0", origin="t"))
    assert read[-1].subchart_data and read[-1].deprecations and read[-1].values_refs  # every field holds something
    for data in read:
        assert chart.from_plain(marshal.loads(marshal.dumps(chart.as_plain(data)))) == data, data.name


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """From now on every chart directory actually parsed is appended to the list returned."""
    reads: list[Path] = []
    real_load = chart_directory.load_chart_dir

    def counting(directory: Path, **kwargs: str) -> chart.ChartData:
        reads.append(directory)
        return real_load(directory, **kwargs)

    monkeypatch.setattr(chart_directory, "load_chart_dir", counting)
    return reads


def _cached_source(root: Path, parsed: Path) -> sources.DirectorySource:
    return sources.DirectorySource(root, "test", parsed_dir=parsed)


def test_a_parsed_chart_is_read_from_the_cache_until_a_file_of_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helm_component: Callable[..., ComponentRef]
) -> None:
    root, parsed = tmp_path / "charts", tmp_path / "parsed"
    directory = root / "demo" / "1.0.0"
    directory.mkdir(parents=True)
    (directory / "values.yaml").write_text("image:\n  old: v1  # Deprecated, replaced by image.tag\n  tag: v1\n")
    (directory / "values-refs.txt").write_text("image.tag\n")
    component = helm_component("demo", "1.0.0", {})
    first = _cached_source(root, parsed).chart_for(component)
    assert len(list(parsed.iterdir())) == 1
    assert first.deprecations  # a non-trivial chart

    reads = _count_reads(monkeypatch)
    assert _cached_source(root, parsed).chart_for(component) == first  # a new process: from the cache
    assert reads == []

    (directory / "values-refs.txt").write_text("image.tag\nimage.digest\n")
    edited = _cached_source(root, parsed).chart_for(component)
    assert reads == [directory]
    assert ("image", "digest") in edited.values_refs
    assert len(list(parsed.iterdir())) == 1  # the stale file was dropped

    (cache_file,) = parsed.iterdir()
    cache_file.write_bytes(b"not marshal")
    assert _cached_source(root, parsed).chart_for(component) == edited
    assert len(reads) == 2


def test_an_unwritable_parsed_cache_costs_only_speed(
    tmp_path: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    root, parsed = tmp_path / "charts", tmp_path / "parsed"
    parsed.write_text("a file where the folder would be")
    (root / "demo" / "1.0.0").mkdir(parents=True)
    (root / "demo" / "1.0.0" / "values.yaml").write_text("a: 1\n")
    assert _cached_source(root, parsed).chart_for(helm_component("demo", "1.0.0", {})).defaults == {"a": 1}
    assert parsed.read_text() == "a file where the folder would be"


def test_a_dsx_that_reads_charts_differently_does_not_use_the_old_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, parsed, reader = tmp_path / "demo", tmp_path / "parsed", tmp_path / "reader.py"
    directory.mkdir()
    (directory / "values.yaml").write_text("a: 1\n")
    reader.write_text("# the reader's code, version 1\n")
    monkeypatch.setattr(chart_directory, "_READER_CODE", (str(reader),))
    first = chart_directory.load(directory, name="demo", version="1", origin="t", parsed_dir=parsed)
    reader.write_text("# the reader's code, version 2\n")
    reads = _count_reads(monkeypatch)
    assert chart_directory.load(directory, name="demo", version="1", origin="t", parsed_dir=parsed) == first
    assert reads == [directory]  # parsed again, not served from the first version's file


def test_a_chart_that_changes_while_it_is_read_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory, parsed = tmp_path / "demo", tmp_path / "parsed"
    directory.mkdir()
    (directory / "values.yaml").write_text("a: 1\n")
    real_load = chart_directory.load_chart_dir

    def replaced_meanwhile(path: Path, **kwargs: str) -> chart.ChartData:
        read = real_load(path, **kwargs)
        (path / "values.yaml").write_text("b: 2\n")  # a fetch swapped the folder after the key was taken
        return read

    monkeypatch.setattr(chart_directory, "load_chart_dir", replaced_meanwhile)
    chart_directory.load(directory, name="demo", version="1", origin="t", parsed_dir=parsed)
    assert not parsed.exists() or list(parsed.iterdir()) == []
    monkeypatch.setattr(chart_directory, "load_chart_dir", real_load)
    assert chart_directory.load(directory, name="demo", version="1", origin="t", parsed_dir=parsed).defaults == {"b": 2}
