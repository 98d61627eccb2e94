"""Area of concern: `dsx recipe list` finds every leaf of a catalog and each way a leaf can be broken.

The small catalog (tests/data/recipes/catalog) is copied and broken on purpose, one flaw per test:
each must fail exactly the check it concerns and name the component or constraint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsx.cli.main import main
from dsx.recipes import catalog, listing
from dsx.validation import facts


def entries(root: Path, **filters: str) -> list[listing.Entry]:
    catalog.load.cache_clear()  # each test writes its own copy; the loader caches per root
    return listing.entries(catalog.load(root), filters=filters, health=True, measured=facts.measured)


def leaf(found: list[listing.Entry], name: str) -> listing.LeafReport:
    (report,) = [e.health for e in found if e.name == name]
    assert report is not None
    return report


def test_the_leaves_are_the_overlays_no_other_builds_on(small_catalog: catalog.Catalog) -> None:
    names = [o.name for o in listing.leaves(small_catalog)]
    bases = {o.base for o in small_catalog.overlays}
    assert names == sorted(names) and names
    assert not set(names) & bases
    assert "base" not in names  # the root has no criteria
    every = {o.name for o in small_catalog.overlays if o.criteria}
    assert every - set(names) == {b for b in bases if b and b != "base"}


def test_the_small_catalog_passes_but_for_the_leaf_its_author_left_unresolvable(catalog_copy: Path) -> None:
    found = entries(catalog_copy)
    assert [e.name for e in found] == sorted(e.name for e in found)
    assert all(e.health is None for e in found if not e.is_leaf)
    failed = {e.name: e.health.findings for e in found if e.health is not None and not e.health.passed}
    # h100 alone pulls in lens, whose dependency beta only the eks overlays add: a real finding
    assert list(failed) == ["h100"]
    assert [f.check for f in failed["h100"]] == [listing.Check.RESOLVES]
    assert "lens depends on beta, which is not in the recipe" in failed["h100"][0].problem
    report = leaf(found, "eks-h100-training")
    assert report.overlays[0] == "base" and report.overlays[-1] == "eks-h100-training"
    checks = ("resolves", "constraints", "chartPinned", "checksDeclared")
    assert report.to_dict()["dimensions"] == dict.fromkeys(checks, "pass")


def test_a_constraint_on_a_fact_dsx_does_not_measure_fails_the_constraints_check(catalog_copy: Path) -> None:
    path = catalog_copy / "overlays" / "eks-h100-training.yaml"
    path.write_text(path.read_text().replace("K8s.server.version >= 1.32", "K8s.server.flavour == vanilla"))
    report = leaf(entries(catalog_copy), "eks-h100-training")
    assert [(f.check, f.problem) for f in report.findings] == [
        (listing.Check.CONSTRAINTS, "K8s.server.flavour == vanilla: dsx validate measures no fact 'K8s.server.flavour'")
    ]
    assert report.dimension(listing.Check.CHART_PINNED) == "pass"


def test_a_component_without_health_asserts_fails_the_checks_declared_check(catalog_copy: Path) -> None:
    path = catalog_copy / "components" / "alpha.yaml"
    path.write_text(re.sub(r"  healthCheckAsserts:\n    - \{kind: Deployment, name: alpha\}\n", "", path.read_text()))
    found = entries(catalog_copy)
    failed = {e.name for e in found if e.health is not None and not e.health.passed}
    assert failed == {e.name for e in found if e.health is not None}  # alpha is in every recipe
    report = leaf(found, "eks-h100-training")
    assert [f.problem for f in report.findings] == [
        "alpha: no healthCheckAsserts (dsx validate could not tell it runs)"
    ]
    assert report.dimension(listing.Check.CHECKS_DECLARED) == "fail"


def test_a_helm_component_without_a_source_fails_the_chart_pinned_check(catalog_copy: Path) -> None:
    path = catalog_copy / "components" / "alpha.yaml"
    path.write_text(path.read_text().replace("  source: https://charts.example.test\n", ""))
    report = leaf(entries(catalog_copy), "eks-h100-training")
    assert [(f.check, f.problem) for f in report.findings] == [(listing.Check.CHART_PINNED, "alpha: no source")]


def test_a_leaf_that_does_not_resolve_is_failed_and_its_other_checks_skipped(catalog_copy: Path) -> None:
    path = catalog_copy / "overlays" / "ubuntu.yaml"
    path.write_text(path.read_text() + "  componentRefs:\n    - name: alpha\n      dependencyRefs: [nowhere]\n")
    report = leaf(entries(catalog_copy), "ubuntu")
    assert [f.check for f in report.findings] == [listing.Check.RESOLVES]
    assert "nowhere" in report.findings[0].problem
    assert report.dimension(listing.Check.CONSTRAINTS) == "skipped"
    assert report.overlays == ()


def test_filters_match_exactly_and_any_matches_the_overlays_that_leave_a_dimension_open(catalog_copy: Path) -> None:
    assert {e.name for e in entries(catalog_copy, service="eks")} == {
        o.name for o in catalog.load(catalog_copy).overlays if o.criteria.get("service") == "eks"
    }
    unnamed = entries(catalog_copy, service="any")
    assert unnamed and all("service" not in e.criteria for e in unnamed)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_the_shipped_catalog_lists_every_leaf_passing_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    catalog.load.cache_clear()
    code, out, _ = run(["recipe", "list", "--format", "json"], capsys)
    assert code == 0
    items = json.loads(out)["recipes"]
    leaves = [i for i in items if i["isLeaf"]]
    assert len(leaves) == len(listing.leaves(catalog.load())) >= 25
    assert all(i["health"]["status"] == "pass" for i in leaves)
    code, out, _ = run(["recipe", "list", "--gpu", "h100", "--intent", "training"], capsys)
    assert code == 0
    header = ["name", "service", "accelerator", "os", "intent", "platform", "leaf", "status", "source"]
    assert out.splitlines()[0].split() == header
    assert all(line.split()[2] == "h100" and line.split()[4] == "training" for line in out.splitlines()[2:])


def test_a_failing_leaf_makes_the_command_exit_1_naming_it(
    catalog_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = catalog_copy / "overlays" / "ubuntu.yaml"
    path.write_text(path.read_text().replace("OS.release.ID == ubuntu", "OS.nope.ID == ubuntu"))
    catalog.load.cache_clear()
    monkeypatch.setattr(catalog, "default_root", lambda: catalog_copy)
    code, out, err = run(["recipe", "list"], capsys)
    catalog.load.cache_clear()
    assert code == 1
    assert "ubuntu: constraints: OS.nope.ID == ubuntu: dsx validate measures no fact 'OS.nope.ID'" in out
    assert err.strip() == "dsx: error: 3 of 5 leaves failed: eks-ubuntu, h100, ubuntu"  # eks-ubuntu has it too


def test_recipe_options_before_list_are_refused_with_where_they_go(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["recipe", "--service", "eks", "list"], capsys)
    assert code == 2
    assert "--service: give the options of `dsx recipe list` after 'list'" in err
