"""The sentinel's files a user names: its policy, analyzer rules, event policies, an Xid catalog.

Read here and parsed by `dsx.health` (which does no I/O); the shipped defaults come from
`dsx.catalog` through the domain's own `default()`/`shipped_…()` functions.
"""

from __future__ import annotations

from pathlib import Path

from dsx.files.documents import load_mapping_file, read_text
from dsx.health.decisions import analyzer, policy
from dsx.health.parsing import kube_objects, node_events, xid


def sentinel_policy(path: str | Path | None) -> policy.SentinelPolicy:
    """A policy file (None: the shipped default); every error names the file and field."""
    if path is None:
        return policy.default()
    return policy.from_dict(load_mapping_file(path), source=str(path))


def analyzer_rules(path: str | Path | None) -> list[analyzer.AnalyzerRule]:
    """A rules file (None or empty: the shipped rules); every error names the file, the rule and the field."""
    if not path:
        return analyzer.shipped_rules()
    return analyzer.rules_from_dict(load_mapping_file(path), source=str(path))


def node_event_policies(path: str | Path) -> list[node_events.EventPolicy]:
    return node_events.policies_from_dict(load_mapping_file(path), source=str(path))


def kube_object_policies(path: str | Path) -> list[kube_objects.NodePolicy]:
    return kube_objects.policies_from_dict(load_mapping_file(path), source=str(path))


def xid_catalog(path: str | Path) -> xid.XidCatalog:
    """The YAML judgement at `path` over the workbook TSVs beside it."""
    where = Path(path)
    workbook = {name: read_tsv(where.parent / name) for name in xid.WORKBOOK_FILES}
    return xid.catalog_from_dict(load_mapping_file(where), workbook, source=str(where))


def read_tsv(path: str | Path) -> list[dict[str, str]]:
    return xid.parse_tsv(read_text(path), source=str(path))
