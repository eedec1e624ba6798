"""The archive port: immutable objects by key, and the local-directory implementation.

The port is what an object store offers (S3, GCS, Azure Blob): `put` an object once, `get` it,
`list` the keys under a prefix in order. An object store adapter implements the same three
methods; nothing else in terminus touches the archive's medium.

Layout: one object per archived segment of a partition (service/retention/records.py), named
`<prefix>/p<partition>/<first id>_<last id>_<entries>`, the ids' numbers zero-padded, so listing a
partition gives its segments in log order and the last one tells where the archive ends.

`LocalArchive` makes an object durable before `put` returns: it writes a temporary file in the
same directory, fsyncs it, renames it over the key (atomic on POSIX) and fsyncs the directory.
A crash leaves either no object or the whole object, never a part. `put` of a key that exists
with the same bytes does nothing (a retried archive pass); with other bytes it raises, since
objects are immutable.

Errors:
    ArchiveError
        ArchiveConflict   a put of other bytes under an existing key
        ArchiveMissing    a get of a key that holds nothing
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Final, Protocol

from terminus.service import TerminusError
from terminus.service.fold.releases import id_key

TMP: Final = ".tmp-"


class ArchiveError(TerminusError):
    """Root of the archive's errors; `key` names the object."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"archive object {key!r}: {message}")
        self.key = key


class ArchiveConflict(ArchiveError):
    """An object exists under the key with other bytes: objects are never rewritten."""


class ArchiveMissing(ArchiveError):
    """No object under the key."""


class Archive(Protocol):
    """Immutable objects by key: the shape of an object store."""

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` durably before returning; a no-op if it is there already."""

    def get(self, key: str) -> bytes:
        """The object under `key`; raises `ArchiveMissing`."""

    def list(self, prefix: str) -> list[str]:
        """The keys that start with `prefix`, in lexical order."""


def partition_prefix(prefix: str, partition: int) -> str:
    """Where the segments of one partition of one key prefix live."""
    return f"{prefix}/p{partition}/"


def segment_key(prefix: str, partition: int, first_id: str, last_id: str, count: int) -> str:
    where = partition_prefix(prefix, partition)
    return f"{where}{_padded(first_id)}_{_padded(last_id)}_{count}"


def segment_info(key: str) -> tuple[str, int]:
    """The last entry id a segment key names, and how many entries the segment holds."""
    _, last, count = key.rsplit("/", 1)[1].split("_")
    ms, seq = last.split("-")
    return f"{int(ms)}-{int(seq)}", int(count)


def _padded(entry_id: str) -> str:
    ms, seq = id_key(entry_id)
    return f"{ms:020d}-{seq:020d}"


class LocalArchive:
    """An archive in a directory: one file per object, written durably."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if path.exists():
            if path.read_bytes() != data:
                raise ArchiveConflict(key, "exists with other bytes")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{TMP}{path.name}.{uuid.uuid4().hex}")
        with open(tmp, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)  # atomic: readers see no object or the whole one
        _fsync_dir(path.parent)  # the rename itself survives a power cut

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ArchiveMissing(key, "no such object") from None

    def list(self, prefix: str) -> list[str]:
        folder, _, start = prefix.rpartition("/")
        directory = self.root / folder if folder else self.root
        if not directory.is_dir():
            return []
        names = (p.name for p in directory.iterdir() if p.is_file())
        found = [name for name in names if name.startswith(start) and not name.startswith(TMP)]
        return sorted(f"{folder}/{name}" if folder else name for name in found)

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") or p.startswith(TMP) for p in parts):
            raise ArchiveError(key, "not a valid key")
        return self.root.joinpath(*parts)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
