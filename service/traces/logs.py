"""Each partition's inbound log, read as `terminus replay` reads it, folded into turn traces.

A partition's log is its archived segments, in order, then the live log after the last
segment's end (service/cli/replay.py reads it the same way). Unlike replay, the live log is read
to its end, not to the entry the workers delivered last: the fold here is the core's own and
needs nothing the workers committed. A `PartitionTraces` remembers where it stopped, so the
follower reads only what was appended since; from a mark (marks.py), it starts where an earlier
follower left off.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from redis.asyncio import Redis

from terminus.events.inbound import InboundEvent
from terminus.service.fold.applier import entry_ms
from terminus.service.fold.decoding import Entry, decode_entries
from terminus.service.fold.releases import id_key
from terminus.service.keys import Keys
from terminus.service.redis.replies import xrange
from terminus.service.retention.archive import Archive, partition_prefix, segment_info
from terminus.service.retention.records import unpack_segment
from terminus.service.traces.marks import IdKey, Mark, floor_of, id_of
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
    floor: IdKey = (0, 0)  # the first entry id the first read takes
    exported: IdKey = (0, -1)  # turns that ended at or before this entry were exported
    starts: dict[str, str] = field(default_factory=dict)  # open turn -> its first entry id

    def __post_init__(self) -> None:
        self.folder = Folder(self.config)

    def resume_from(self, mark: Mark) -> None:
        """Before the first read: fold from the mark, export what ended after it."""
        self.floor, self.exported = floor_of(mark), id_key(mark.through)

    def mark(self) -> Mark | None:
        """Where to resume after what was read so far (None: nothing was read)."""
        if self.after is None:
            return None
        resume = min(self.starts.values(), key=id_key) if self.starts else None
        return Mark(resume=resume, through=self.after)

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
            if decoded.event is not None:  # else a dead letter or a release: no turn's story
                trace = self._apply(decoded.event, decoded.entry.id)
                traces += [trace] if trace is not None else []
        if entries:
            self.after = entries[-1].id
        return traces

    def _apply(self, event: InboundEvent, entry_id: str) -> TurnTrace | None:
        records = self.folder.apply(event, entry_ms(entry_id))
        if records is None:
            if event.turn_id in self.folder.open:
                self.starts.setdefault(event.turn_id, entry_id)
            return None
        self.starts.pop(event.turn_id, None)
        return project(records) if id_key(entry_id) > self.exported else None

    async def _pages(self, archive: Archive | None) -> AsyncIterator[list[Entry]]:
        if self.after is None and archive is not None:
            async for entries in self._archived(archive):
                yield entries
        start = id_of(self.floor) if self.after is None else f"({self.after}"
        while rows := await xrange(self.redis, self.keys.inbound, start, "+", PAGE):
            yield [Entry(i.decode(), fields) for i, fields in rows]
            start = f"({rows[-1][0].decode()}"

    async def _archived(self, archive: Archive) -> AsyncIterator[list[Entry]]:
        where = partition_prefix(self.keys.prefix, self.keys.partition)
        end = (0, -1)
        for key in await asyncio.to_thread(archive.list, where):
            blob = await asyncio.to_thread(archive.get, key)
            # Segments may overlap (see replay): each id is folded once, from the first.
            entries = unpack_segment(blob).entries()
            kept = [e for e in entries if id_key(e.id) > end and id_key(e.id) >= self.floor]
            if kept:
                yield [Entry(e.id, dict(e.fields)) for e in kept]
            end = max(end, id_key(segment_info(key)[0]))
        if end >= self.floor:
            self.after = id_of(end)  # the live log goes on after the archive's end
