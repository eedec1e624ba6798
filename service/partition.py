"""The owner of one partition at one lease epoch: drain, read, fold, commit, repeat.

Order of work (DESIGN section 5): on taking the partition, claim and apply every pending entry
(a crashed owner's unacked batch) before reading new ones, so no turn ever sees a later event
before an earlier one. Reads and commits are fenced by the lease in their Lua scripts; a lost
lease ends the owner at its next Redis call. After a connection error the outcome of the last
commit is unknown, so memory is dropped and the owner starts over from the drain: what was
committed is in the snapshots and acked, what was not is still pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.applier import BatchStats, Entry, PartitionFold, Timeouts, decode_entries
from service.commit import LeaseLost, commit_ids
from service.keys import GROUP, Keys
from service.leases import Leases, lease_value
from service.replies import load_turns, text
from service.scripts import script
from service.settings import Settings
from service.stall import StallTimer

log = logging.getLogger("terminus.partition")

TRANSIENT: Final = (RedisConnectionError, RedisTimeoutError, OSError)
START: Final = "0-0"


class PartitionOwner:
    """Runs one partition for `worker_id` while its lease holds `epoch`."""

    def __init__(
        self, redis: Redis, settings: Settings, partition: int, worker_id: str, epoch: int
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = Keys(partition, settings.prefix)
        self.consumer = worker_id
        self.epoch = epoch
        self.lease = lease_value(worker_id, epoch)
        self.leases = Leases(redis, settings.prefix)
        timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
        self.fold = PartitionFold(self.keys, settings.core(), timeouts, settings.session_maxlen)
        self.stalls = StallTimer(redis, self.keys, self.lease, self.fold, settings)
        self.totals = BatchStats()
        self._stopping = asyncio.Event()

    @property
    def partition(self) -> int:
        return self.keys.partition

    def stop(self) -> None:
        """Finish the batch in hand, then return from `run`."""
        self._stopping.set()

    async def run(self) -> None:
        """Own the partition until stopped or the lease is lost (raises `LeaseLost`)."""
        uncertain = False
        while not self._stopping.is_set():
            try:
                if uncertain:
                    await self._refence()
                    uncertain = False
                await self._own()
            except TRANSIENT as exc:
                log.warning("partition %s: %r; starting over", self.partition, exc)
                self.fold.forget()
                uncertain = True
                await self._pause(0.2)

    async def _refence(self) -> None:
        """A new epoch before starting over: a request still in flight on the broken connection
        carries the old lease value, so if it reaches Redis later it writes and moves nothing."""
        epoch = await self.leases.rotate(self.partition, self.consumer, self.epoch)
        if epoch is None:
            raise LeaseLost(self.partition, self.lease)
        self.epoch, self.lease = epoch, lease_value(self.consumer, epoch)
        self.stalls.lease = self.lease

    async def _own(self) -> None:
        await self._ensure_group()
        await self.drain()
        while not self._stopping.is_set():
            entries, tail = await self._read()
            if entries:
                await self.process(entries)
            if len(entries) < self.settings.batch_size:
                # A short batch took all there was: wait from its last entry rather than
                # spend a read call to learn that nothing is left.
                await self._wait(entries[-1].id if entries else tail)
            await self.stalls.tick()

    async def _ensure_group(self) -> None:
        with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists already
            await self.redis.xgroup_create(self.keys.inbound, GROUP, id=START, mkstream=True)

    async def drain(self) -> None:
        """Claim and apply every pending entry of the partition, oldest first."""
        start = START
        while True:
            reply = await self._call("claim", start, self.settings.batch_size)
            next_start, raw_entries, counts = reply
            deliveries = {text(i): int(n) for i, n in counts}
            # An entry deleted while pending comes back as false on Redis 6.2 (7 drops it from
            # the pending list itself); with no id there is nothing to apply or ack.
            entries = [_entry(row, deliveries) for row in raw_entries if row]
            if entries:
                await self.process(entries)
            start = text(next_start)
            if start == START or self._stopping.is_set():
                return

    async def _read(self) -> tuple[list[Entry], str]:
        rows, tail = await self._call("read", self.settings.batch_size)
        return [_entry(row, {}) for row in rows], text(tail)

    async def _wait(self, tail: str) -> None:
        """Block until the log grows past `tail` or the block time ends; changes nothing."""
        if self._stopping.is_set():
            return
        block = self.settings.block_ms
        reading = asyncio.ensure_future(self.redis.xread({self.keys.inbound: tail}, 1, block))
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait((reading, stopping), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not reading.done():
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, *TRANSIENT):
                await reading
        else:
            reading.result()

    async def process(self, entries: Sequence[Entry]) -> BatchStats:
        """Fold a batch and commit it with the acks of all its entries, or raise `LeaseLost`."""
        decoded = decode_entries(entries, self.settings.max_deliveries)
        await load_turns(self.redis, self.fold, self.fold.missing(decoded))
        batch, stats = self.fold.apply(decoded)
        try:
            ids = await commit_ids(self.redis, self.keys, self.lease, batch)
        except BaseException:
            self.fold.forget()
            raise
        if ids is None:
            self.fold.forget()
            raise LeaseLost(self.partition, self.lease)
        self.fold.settle()
        self.stalls.committed()
        self._count(stats)
        return stats

    def _count(self, stats: BatchStats) -> None:
        self.totals.applied += stats.applied
        self.totals.ignored += stats.ignored
        self.totals.dead += stats.dead
        self.totals.frames += stats.frames
        for reason in stats.dead_reasons:
            log.warning("partition %s: dead letter: %s", self.partition, reason)

    async def _call(self, name: str, *args: Any) -> Any:
        keys = [self.keys.lease, self.keys.inbound]
        reply = await script(self.redis, name)(
            keys=keys, args=[self.lease, GROUP, self.consumer, *args]
        )
        if reply == 0:
            raise LeaseLost(self.partition, self.lease)
        return reply

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def _entry(row: list[Any], deliveries: dict[str, int]) -> Entry:
    """An entry from a script reply: [id, [f1, v1, ...]], fields false if deleted."""
    entry_id = text(row[0])
    flat = row[1] if len(row) > 1 else None
    fields = dict(zip(flat[::2], flat[1::2], strict=True)) if flat else None
    return Entry(entry_id, fields, deliveries.get(entry_id, 1))
