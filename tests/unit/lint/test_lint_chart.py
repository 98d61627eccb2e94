"""Area of concern: reading chart data — template refs, deprecation comments, unpacked charts."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.errors import BadInputError
from dsx.lint import chart
from dsx.lint.chart import split_path


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

    data = chart.load_chart_dir(root, name="mychart", version="1.0.0", origin="test")

    assert data.values_refs == {("image", "tag"), ("image", "digest"), ("cache", "enabled")}
    assert data.subcharts == ("cache", "pg")
    assert set(data.subchart_data) == {"cache"}
    assert data.subchart_data["cache"].defaults == {"port": 6379}


def test_a_broken_values_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text("a: [unclosed\n")

    with pytest.raises(BadInputError, match=r"values\.yaml: malformed YAML"):
        chart.load_chart_dir(tmp_path, name="x", version="1", origin="test")
