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


def test_no_folder_has_no_digest_and_shifted_bytes_do_not_collide(tmp_path: Path) -> None:
    import shutil

    assert marshal_cache.tree_digest(str(tmp_path / "missing")) is None
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: a")
    (chart / "templates" / "x").write_text("T")
    two_files = marshal_cache.tree_digest(str(chart))
    shutil.rmtree(chart)
    chart.mkdir()
    (chart / "Chart.yaml").write_bytes(b"name: a\0templates/x\0T")  # the same bytes, run together
    assert marshal_cache.tree_digest(str(chart)) != two_files


def test_the_code_that_reads_the_sources_is_part_of_the_key(tmp_path: Path) -> None:
    sources, code = tmp_path / "sources", tmp_path / "code"
    sources.mkdir()
    (sources / "values.yaml").write_text("a: 1\n")
    (code / "__pycache__").mkdir(parents=True)
    (code / "reader.py").write_text("VERSION = 1\n")
    first = marshal_cache.tree_digest(str(sources), code=[str(code)])
    (code / "__pycache__" / "reader.cpython-311.pyc").write_bytes(b"compiled")  # bytecode is not code
    assert marshal_cache.tree_digest(str(sources), code=[str(code)]) == first
    (code / "reader.py").write_text("VERSION = 2\n")
    assert marshal_cache.tree_digest(str(sources), code=[str(code)]) != first
    assert marshal_cache.tree_digest(str(sources), code=[str(code / "reader.py")]) is not None


def test_a_write_removes_long_unused_files_and_old_temporaries(tmp_path: Path) -> None:
    import os
    import time

    old = time.time() - 31 * 86400
    for name in ("unused-k.tag.marshal", ".x.marshal.0123.tmp", "recent-k.tag.marshal", "notes.txt"):
        (tmp_path / name).write_text("x")
    for name in ("unused-k.tag.marshal", ".x.marshal.0123.tmp", "notes.txt"):
        os.utime(tmp_path / name, (old, old))
    marshal_cache.write(str(tmp_path), "stem", "k", 1, version=1)
    assert sorted(p.name.split(".")[0] for p in tmp_path.iterdir()) == ["notes", "recent-k", "stem-k"]
