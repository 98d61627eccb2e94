"""Invariant: every shipped document of the kinds decoded by `dsx.model.schema.document` is written
with camelCase keys, so reading the catalog warns about no old spelling."""

from __future__ import annotations

import logging

import pytest

from dsx.certify.parsing import profiles
from dsx.files import health_files
from dsx.health.decisions import analyzer, policy
from dsx.health.parsing import kube_objects, xid


def test_the_shipped_rule_profile_and_catalog_files_read_without_an_old_key_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert analyzer.shipped_rules()
        assert kube_objects.shipped_policies()
        assert [p.name for p in profiles.load_all()]
        assert health_files.xid_catalog(xid.CATALOG_PATH).entries
        assert health_files.sentinel_policy(str(policy.DEFAULT_PATH))
    assert [r.getMessage() for r in caplog.records if "old snake_case" in r.getMessage()] == []
