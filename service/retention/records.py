"""What the archive holds: segments of a partition's log, as the archiver writes them.

A segment is one object of the archive: every inbound entry of one partition in an id range
(`first_id`..`last_id`), with their ids and exact field bytes, grouped as

    turns   one `TurnRecord` per finalized turn whose entries are in the range: those entries,
            the final snapshot (msgpack `Turn`), its persisted message and partial record as
            committed (JSON), so one turn can be read back without replaying anything
    loose   the entries of no finalized turn: undecodable ones, events of turns that never
            started or were released already, release entries

A replay merges both by id, which gives back the log exactly as it was. Objects are msgpack
compressed with zlib (standard library, fast enough for text-heavy entries; the archive is
written once and read rarely, so a better ratio would not pay for a new dependency).
"""

from __future__ import annotations

import zlib
from typing import Final

import msgspec

from terminus.service.fold.releases import id_key

FORMAT: Final = 1


class ArchivedEntry(msgspec.Struct, frozen=True, array_like=True):
    """An inbound entry as it was in the log: its id and its fields, bytes for bytes."""

    id: str
    fields: list[tuple[bytes, bytes]]


class TurnRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A finalized turn: its entries in the segment and what it left in Redis."""

    turn_id: str
    session_id: str
    state: str
    entries: list[ArchivedEntry]
    snapshot: bytes
    message: bytes | None = None
    partial: bytes | None = None


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """Every inbound entry of `partition` from `first_id` to `last_id`, both included."""

    format: int = FORMAT
    partition: int
    first_id: str
    last_id: str
    turns: list[TurnRecord]
    loose: list[ArchivedEntry]

    def entries(self) -> list[ArchivedEntry]:
        """All entries of the segment in log order."""
        merged = [e for record in self.turns for e in record.entries] + list(self.loose)
        return sorted(merged, key=lambda e: id_key(e.id))


_segment = msgspec.msgpack.Decoder(Segment)


def pack_segment(segment: Segment) -> bytes:
    return zlib.compress(msgspec.msgpack.encode(segment), 6)


def unpack_segment(blob: bytes) -> Segment:
    return _segment.decode(zlib.decompress(blob))
