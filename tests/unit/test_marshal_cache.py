"""`dsx.marshal_cache`: a file is trusted only in its own shape, and a stem keeps one key."""

from __future__ import annotations

import marshal
from pathlib import Path

from dsx import marshal_cache


def test_a_file_is_read_back_only_at_its_version(tmp_path: Path) -> None:
    marshal_cache.write(str(tmp_path), "stem", "k1", {"a": [1, 2.5, None, "x"]}, version=1)
    assert marshal_cache.read(str(tmp_path), "stem", "k1", version=1) == {"a": [1, 2.5, None, "x"]}
    assert marshal_cache.read(str(tmp_path), "stem", "k1", version=2) is None
    assert marshal_cache.read(str(tmp_path), "stem", "k2", version=1) is None
    assert marshal_cache.read(str(tmp_path), "other", "k1", version=1) is None


def test_a_foreign_or_broken_file_is_a_miss(tmp_path: Path) -> None:
    marshal_cache.write(str(tmp_path), "stem", "k", 1, version=1)
    (path,) = tmp_path.iterdir()
    path.write_bytes(marshal.dumps({"format": 1}))  # the shape of an older cache
    assert marshal_cache.read(str(tmp_path), "stem", "k", version=1) is None
    path.write_bytes(b"\x00garbage")
    assert marshal_cache.read(str(tmp_path), "stem", "k", version=1) is None


def test_writing_a_key_drops_the_stems_other_keys_only(tmp_path: Path) -> None:
    for stem, key in (("a", "1"), ("a", "2"), ("ab", "1"), ("b", "1")):
        marshal_cache.write(str(tmp_path), stem, key, key, version=1)
    assert sorted(p.name.split(".")[0] for p in tmp_path.iterdir()) == ["a-2", "ab-1", "b-1"]


def test_data_marshal_cannot_hold_and_an_unwritable_folder_are_skipped(tmp_path: Path) -> None:
    marshal_cache.write(str(tmp_path), "stem", "k", {"f": object()}, version=1)
    assert list(tmp_path.iterdir()) == []
    blocked = tmp_path / "file"
    blocked.write_text("x")
    marshal_cache.write(str(blocked), "stem", "k", 1, version=1)
    assert blocked.read_text() == "x"


def test_the_tree_digest_follows_every_file_and_its_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("1")
    first = marshal_cache.tree_digest(str(tmp_path))
    assert first == marshal_cache.tree_digest(str(tmp_path))
    (tmp_path / "sub" / "f").write_text("2")
    second = marshal_cache.tree_digest(str(tmp_path))
    (tmp_path / "sub" / "f").rename(tmp_path / "sub" / "g")
    third = marshal_cache.tree_digest(str(tmp_path))
    assert len({first, second, third}) == 3
    assert marshal_cache.tree_digest(str(tmp_path), ("missing",)) != first  # no files: the root alone
