"""What a sink reads: a partition's committed log after a position, archive first, as replay.

Committed means acknowledged by the workers' group: an entry below the oldest pending one and
not past the last one delivered. An entry still pending may yet be dead-lettered for its
delivery count, which the log cannot tell; the workers write such a dead letter in the commit
that acks the entry, so once the entry is below the horizon its dead letter can be read, and
the sink folds it as dead exactly as the workers did (`forced`).

The archiver moves entries from the log to the archive while a sink reads. It writes the
segment before it trims, so after each read of the live log the archive is listed again: a
segment that now ends after the position may hold entries the read missed, and the page is
dropped and read again from the archive.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.fold.decoding import Entry
from terminus.service.fold.releases import id_key
from terminus.service.keys import GROUP, START, Keys
from terminus.service.redis.replies import text, xrange
from terminus.service.retention.archive import Archive, partition_prefix, segment_info
from terminus.service.retention.records import unpack_segment

DELIVERED: Final = "delivered "  # the reason a dead letter for its delivery count opens with


async def horizon(redis: Redis, keys: Keys) -> str | None:
    """The XRANGE end of what the workers committed (`(id` is exclusive); None if nothing."""
    try:
        groups = cast("list[dict[str, object]]", await redis.xinfo_groups(keys.inbound))
    except ResponseError:  # no such stream: nothing was ever published here
        return None
    group = next((g for g in groups if text(g["name"]) == GROUP), None)
    if group is None or text(group["last-delivered-id"]) == START:
        return None
    delivered = text(group["last-delivered-id"])
    if int(cast(int, group["pending"])):
        oldest = await redis.xpending(keys.inbound, GROUP)
        # Acked between the two reads: every entry delivered before then is committed.
        return delivered if oldest["min"] is None else "(" + text(oldest["min"])
    return delivered


@dataclass
class PartitionLog:
    """One partition's committed entries in log order, page by page."""

    redis: Redis
    keys: Keys
    archive: Archive | None
    page: int
    forced: dict[str, str] = field(default_factory=dict)  # entry id -> its dead letter's reason
    _dead_seen: str = START
    _segment: tuple[str, list[Entry]] = ("", [])  # the last segment read, unpacked

    async def after(self, position: str) -> list[Entry]:
        """Up to `page` committed entries after `position`, oldest first."""
        archived = await self._archived(position)
        if archived:
            return archived
        end = await horizon(self.redis, self.keys)
        if end is None:
            return []
        rows = await xrange(self.redis, self.keys.inbound, "(" + position, end, self.page)
        if rows and await self._segments_after(position):
            return []  # the archiver moved entries meanwhile: read them from the archive
        await self._read_dead()
        return [Entry(i.decode(), fields) for i, fields in rows]

    async def _segments_after(self, position: str) -> list[str]:
        if self.archive is None:
            return []
        where = partition_prefix(self.keys.prefix, self.keys.partition)
        listed = await asyncio.to_thread(self.archive.list, where)
        mark = id_key(position)
        return [key for key in listed if id_key(segment_info(key)[0]) > mark]

    async def _archived(self, position: str) -> list[Entry]:
        mark = id_key(position)
        for key in await self._segments_after(position):
            entries = [e for e in await self._unpacked(key) if id_key(e.id) > mark]
            if entries:
                await self._read_dead()
                return entries[: self.page]
        return []

    async def _unpacked(self, key: str) -> list[Entry]:
        if self._segment[0] != key:
            assert self.archive is not None
            blob = await asyncio.to_thread(self.archive.get, key)
            entries = [Entry(e.id, dict(e.fields)) for e in unpack_segment(blob).entries()]
            self._segment = (key, entries)
        return self._segment[1]

    async def _read_dead(self) -> None:
        """Learn the dead letters written since the last look (the workers' stream is never
        trimmed: operators keep it)."""
        for entry_id, fields in await xrange(self.redis, self.keys.dead, "(" + self._dead_seen):
            self._dead_seen = entry_id.decode()
            reason = fields.get(b"reason", b"").decode()
            if reason.startswith(DELIVERED):
                self.forced[fields[b"source_id"].decode()] = reason
