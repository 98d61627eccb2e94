"""Area of concern: the `did you mean …?` suggestion picks the key a person most likely meant, or none."""

from __future__ import annotations

from dsx.lint import suggest
from dsx.lint.chart import split_path

KNOWN = [
    split_path(p)
    for p in (
        "driver",
        "driver.version",
        "driver.enabled",
        "driver.upgradePolicy",
        "driver.upgradePolicy.maxParallelUpgrades",
        "driver.manager.version",
        "validator.version",
        "operator",
        "operator.replicaCount",
        "scheduler",
        "scheduler.placementStrategy",
        "nfd",
        "upgradeCRDs",
    )
]


def test_edit_distance_counts_an_adjacent_swap_as_one_edit() -> None:
    assert suggest.edit_distance("verison", "version") == 1
    assert suggest.edit_distance("kitten", "sitting") == 3
    assert suggest.edit_distance("", "abc") == 3
    assert suggest.edit_distance("same", "same") == 0


def test_a_sibling_typo_is_suggested() -> None:
    assert suggest.closest_key(split_path("driver.verison"), KNOWN) == split_path("driver.version")
    assert suggest.closest_key(split_path("driver.Enabled"), KNOWN) == split_path("driver.enabled")


def test_the_same_key_under_another_parent_of_the_same_section_is_suggested() -> None:
    assert suggest.closest_key(split_path("driver.maxParallelUpgrades"), KNOWN) == split_path(
        "driver.upgradePolicy.maxParallelUpgrades"
    )
    assert suggest.closest_key(split_path("driver.maxParallelUpgrade"), KNOWN) == split_path(
        "driver.upgradePolicy.maxParallelUpgrades"
    )


def test_a_top_level_key_that_belongs_deeper_is_suggested_by_exact_name() -> None:
    assert suggest.closest_key(split_path("maxParallelUpgrades"), KNOWN) == split_path(
        "driver.upgradePolicy.maxParallelUpgrades"
    )


def test_nothing_close_means_no_suggestion() -> None:
    for path in ("nvIpam", "secondaryNetwork", "deployCR", "nicClusterPolicy", "driver.somethingElse"):
        assert suggest.closest_key(split_path(path), KNOWN) is None, path


def test_no_suggestion_crosses_into_an_unrelated_section() -> None:
    assert suggest.closest_key(split_path("scheduler.replicaCount"), KNOWN) is None
    assert suggest.closest_key(split_path("schedulr"), KNOWN) == split_path("scheduler")
