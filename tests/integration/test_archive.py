"""The local-directory archive (service/retention/archive.py): durable before `put` returns,
immutable, never showing half an object, listing a partition's segments in log order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from terminus.service.retention.archive import (
    ArchiveConflict,
    ArchiveError,
    ArchiveMissing,
    LocalArchive,
    partition_prefix,
    segment_info,
    segment_key,
)


def test_an_object_is_fsynced_then_renamed_into_place_then_its_directory_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append("fsync dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        steps.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    LocalArchive(tmp_path).put("a/p0/key", b"data")
    assert steps == ["fsync file", "rename", "fsync dir"]
    assert (tmp_path / "a" / "p0" / "key").read_bytes() == b"data"


def test_objects_are_immutable_and_a_repeated_put_is_a_no_op(tmp_path: Path) -> None:
    archive = LocalArchive(tmp_path)
    archive.put("a/p0/key", b"data")
    archive.put("a/p0/key", b"data")
    with pytest.raises(ArchiveConflict):
        archive.put("a/p0/key", b"other")
    assert archive.get("a/p0/key") == b"data"
    with pytest.raises(ArchiveMissing):
        archive.get("a/p0/none")
    with pytest.raises(ArchiveError):
        archive.put("a/../escape", b"x")


def test_a_write_cut_short_leaves_no_object(tmp_path: Path) -> None:
    archive = LocalArchive(tmp_path)
    folder = tmp_path / "a" / "p0"
    folder.mkdir(parents=True)
    (folder / ".tmp-key.0123").write_bytes(b"half")  # a crash before the rename
    assert archive.list("a/p0/") == []
    archive.put("a/p0/key", b"whole")
    assert archive.list("a/p0/") == ["a/p0/key"]


def test_segments_list_in_log_order(tmp_path: Path) -> None:
    archive = LocalArchive(tmp_path)
    ranges = [("9-0", "9-5", 6), ("10-0", "100-0", 3), ("100-1", "1000-2", 2)]
    for first, last, count in reversed(ranges):
        archive.put(segment_key("t", 3, first, last, count), b"x")
    listed = archive.list(partition_prefix("t", 3))
    assert [segment_info(key) for key in listed] == [(last, n) for _, last, n in ranges]
    assert archive.list(partition_prefix("t", 4)) == []
