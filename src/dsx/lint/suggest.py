"""The closest key a chart knows to one it does not: the `did you mean …?` of a lint finding.

Two mistakes dominate: a key under the wrong parent (`driver.maxParallelUpgrades` for
`driver.upgradePolicy.maxParallelUpgrades`) and a misspelt key (`driver.verison`). Candidates
are scored by the edit distance between last segments, then by whether they are siblings,
then by how much of the path they share. A candidate outside the key's top-level section is
only offered for a top-level key, so a suggestion never sends the reader to an unrelated part
of the chart; no candidate within the distance limit means no suggestion.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsx.lint.chart import KeyPath, dotted


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps."""
    previous_row: list[int] | None = None
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous_row, row = previous_row, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous_row[j] + 1, row[j - 1] + 1, previous_row[j - 1] + cost)
            if before is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[len(b)]


def distance_limit(word: str) -> int:
    """How many edits still read as the same word: one for short names, up to three for long ones."""
    if len(word) <= 4:
        return 1
    if len(word) <= 9:
        return 2
    return 3


def closest_key(path: KeyPath, known: Iterable[KeyPath]) -> KeyPath | None:
    """The known key most likely meant by `path`, or None when nothing is close enough."""
    leaf = path[-1].lower()
    limit = distance_limit(leaf)
    parent = path[:-1]
    best: tuple[tuple[int, int, int, int, str], KeyPath] | None = None
    for candidate in known:
        if candidate == path or not candidate:
            continue
        shared = _shared_prefix(path, candidate)
        if len(path) > 1 and shared == 0:
            continue
        distance = edit_distance(leaf, candidate[-1].lower())
        if distance > limit:
            continue
        sibling = candidate[:-1] == parent
        if distance > 0 and not sibling and len(path) == 1:
            continue  # a fuzzy match deep in another section is a guess, not a suggestion
        score = (distance, 0 if sibling else 1, -shared, len(candidate), dotted(candidate))
        if best is None or score < best[0]:
            best = (score, candidate)
    return best[1] if best else None


def _shared_prefix(a: KeyPath, b: KeyPath) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count
