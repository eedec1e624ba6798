"""One partition followed into the database, at one lease epoch, page by page.

Order of a page: read the committed entries after the last one folded, fold them, then one
transaction writes their rows and moves the position; only then is the next page read. The
fold always starts from the log's beginning (a sink keeps no state but the database's
position), and writes nothing for the entries up to that position: on a takeover or a restart,
what was written is not written again, and what was not is written once.

A database that goes away (a restart, a network cut) fails the page's transaction; the same
page is sent again, with growing pauses, until it commits or the position says another sink
moved on (`Fenced`: this follower ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final, TypeVar

from redis.asyncio import Redis

from terminus.events.codec import encode_json
from terminus.service.fold.releases import id_key
from terminus.service.keys import Keys
from terminus.service.retention.archive import Archive
from terminus.service.settings import Settings
from terminus.service.sinks.folding import SinkFold
from terminus.service.sinks.rows import MessageRow, Row
from terminus.service.sinks.source import PartitionLog, horizon
from terminus.service.sinks.transact import (
    START,
    DatabaseAway,
    Refusal,
    Session,
    Unit,
    claim,
    write_unit,
)

log = logging.getLogger("terminus.sink")
POLL_S: Final = 0.1
RETRY_S: Final = (0.1, 0.2, 0.5, 1.0, 2.0)
T = TypeVar("T")


@dataclass
class Tally:
    """What a follower did, for the command's summary and the counters."""

    entries: int = 0
    rows: int = 0
    refused: int = 0
    retries: int = 0


@dataclass
class Follower:
    """Follows `partition` at `epoch` into `session` until `stop` (or, `once`, until caught up)."""

    redis: Redis
    settings: Settings
    session: Session
    name: str
    sink_keys: Keys  # the sink's own namespace for this partition: dead letters and counters
    epoch: int
    archive: Archive | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tally: Tally = field(default_factory=Tally)

    @property
    def partition(self) -> int:
        return self.sink_keys.partition

    async def run(self, once: bool = False) -> Tally:
        """Follow until stopped; with `once`, until every committed entry is written."""
        claiming = partial(claim, self.session, self.name, self.partition, self.epoch)
        position = await self._retrying(claiming)
        keys = Keys(self.partition, self.settings.prefix)
        fold = SinkFold(keys, self.settings, position)
        source = PartitionLog(self.redis, keys, self.archive, self.settings.batch_size)
        read, end = START, await self._end(keys) if once else None
        while not self.stop.is_set():
            entries = await source.after(read)
            if entries:
                read = entries[-1].id
                rows = fold.apply(entries, source.forced)
                position = await self._page(rows, position, read, keys)
                self.tally.entries += len(entries)
            if once and (not entries or (end is not None and id_key(read) >= end)):
                break  # caught up with what was committed when it began
            if not entries:
                await self._pause(POLL_S)
        return self.tally

    async def _end(self, keys: Keys) -> tuple[int, int] | None:
        """Where the committed log ends now (its last entry, or the pending one it stops
        before): `once` stops there under a steady load."""
        end = await horizon(self.redis, keys)
        return None if end is None else id_key(end.lstrip("("))

    async def _page(self, rows: list[Row], position: str, read: str, keys: Keys) -> str:
        """Write the rows and move the position to `read`, in one transaction, if the page
        lies past the position (the fold reads again what an earlier epoch wrote); returns
        the position now."""
        if id_key(read) <= id_key(position):
            return position
        unit = Unit(self.name, self.partition, self.epoch, position, read, rows)
        stored = await self._retrying(partial(write_unit, self.session, unit, self._dead))
        await self._count(keys, read, stored)
        return read

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt()` again, with growing pauses, for as long as the database is away; once
        stopped, the page is given up (its position never moved: the next holder writes it)."""
        for n in itertools.count():
            try:
                return await attempt()
            except DatabaseAway as exc:
                if self.stop.is_set():
                    raise
                self.tally.retries += 1
                await self.redis.hincrby(self.sink_keys.metrics, "database_errors", 1)
                pause = RETRY_S[min(n, len(RETRY_S) - 1)]
                log.warning(
                    "sink %s p%d: %s; again in %.1f s", self.name, self.partition, exc, pause
                )
                await self._pause(pause)
        raise AssertionError("itertools.count() ended")

    async def _dead(self, refusals: list[Refusal]) -> None:
        """Each refused row to the sink's dead letters, with the database's reason."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for refusal in refusals:
                row = refusal.row
                body = (
                    row.body if isinstance(row, MessageRow) else encode_json(row._asdict()).decode()
                )
                v = row.version
                pipe.xadd(
                    self.sink_keys.dead,
                    {
                        "raw": body,
                        "reason": f"database refused: {refusal.reason}",
                        "source_stream": Keys(self.partition, self.settings.prefix).inbound,
                        "source_id": f"{v.log_ms}-{v.log_seq}",
                    },
                )
            await pipe.execute()
        self.tally.refused += len(refusals)
        await self.redis.hincrby(self.sink_keys.metrics, "refused", len(refusals))
        for refusal in refusals:
            log.error(
                "sink %s p%d: database refused a row: %s", self.name, self.partition, refusal.reason
            )

    async def _count(self, keys: Keys, position: str, stored: int) -> None:
        """The sink's counters (docs/sinks.md), after the page committed: pages and rows
        written, the position, and the lag (log time between the position and the horizon)."""
        self.tally.rows += stored
        end = await horizon(self.redis, keys)
        lag = 0 if end is None else max(0, id_key(end.lstrip("("))[0] - id_key(position)[0])
        metrics = self.sink_keys.metrics
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hincrby(metrics, "pages", 1)
            pipe.hincrby(metrics, "rows", stored)
            pipe.hset(metrics, mapping={"position": position, "lag_ms": lag})
            await pipe.execute()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)
