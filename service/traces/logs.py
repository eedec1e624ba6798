"""Each partition's inbound log, read as `terminus replay` reads it, folded into turn traces.

A partition's log is its archived segments, in order, then the live log after the last
segment's end (service/cli/replay.py reads it the same way). Unlike replay, the live log is read
to its end, not to the entry the workers delivered last: the fold here is the core's own and
needs nothing the workers committed. A `PartitionTraces` remembers where it stopped, so the
follower reads only what was appended since.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from redis.asyncio import Redis

from terminus.service.fold.applier import entry_ms
from terminus.service.fold.decoding import Entry, decode_entries
from terminus.service.fold.releases import id_key
from terminus.service.keys import Keys
from terminus.service.redis.replies import xrange
from terminus.service.retention.archive import Archive, partition_prefix, segment_info
from terminus.service.retention.records import unpack_segment
from terminus.service.traces.project import project
from terminus.service.traces.records import Folder
from terminus.service.traces.spans import TurnTrace
from terminus.statemachines.config import CoreConfig

PAGE: Final = 1_000
NO_LIMIT: Final = 2**31  # deliveries: the log is read here, never delivered


@dataclass
class PartitionTraces:
    """One partition's turns, folded from its log; `after` is the last entry id read."""

    redis: Redis
    keys: Keys
    config: CoreConfig
    max_event_bytes: int
    folder: Folder = field(init=False)
    after: str | None = None

    def __post_init__(self) -> None:
        self.folder = Folder(self.config)

    async def read(self, archive: Archive | None) -> list[TurnTrace]:
        """The traces of the turns that became final in what was appended since the last read
        (on the first, the archive, then the whole live log)."""
        traces: list[TurnTrace] = []
        async for entries in self._pages(archive):
            traces += self.feed(entries)
        return traces

    def feed(self, entries: list[Entry]) -> list[TurnTrace]:
        """Fold entries in log order; the traces of the turns they made final."""
        traces = []
        for decoded in decode_entries(entries, NO_LIMIT, max_bytes=self.max_event_bytes):
            if decoded.event is None:
                continue  # a dead letter or the archiver's release: no turn's story
            records = self.folder.apply(decoded.event, entry_ms(decoded.entry.id))
            if records is not None:
                traces.append(project(records))
        if entries:
            self.after = entries[-1].id
        return traces

    async def _pages(self, archive: Archive | None) -> AsyncIterator[list[Entry]]:
        if self.after is None and archive is not None:
            async for entries in self._archived(archive):
                yield entries
        start = "-" if self.after is None else f"({self.after}"
        while rows := await xrange(self.redis, self.keys.inbound, start, "+", PAGE):
            yield [Entry(i.decode(), fields) for i, fields in rows]
            start = f"({rows[-1][0].decode()}"

    async def _archived(self, archive: Archive) -> AsyncIterator[list[Entry]]:
        where = partition_prefix(self.keys.prefix, self.keys.partition)
        end = (0, -1)
        for key in await asyncio.to_thread(archive.list, where):
            blob = await asyncio.to_thread(archive.get, key)
            # Segments may overlap (see replay): each id is folded once, from the first.
            kept = [e for e in unpack_segment(blob).entries() if id_key(e.id) > end]
            if kept:
                yield [Entry(e.id, dict(e.fields)) for e in kept]
            end = max(end, id_key(segment_info(key)[0]))
        if end != (0, -1):
            self.after = f"{end[0]}-{end[1]}"  # the live log goes on after the archive's end
