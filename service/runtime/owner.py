"""The owner of one partition at one lease epoch: its fold, its place in the log, its next step.

Order of work (DESIGN section 5): on taking the partition, claim and apply every pending entry
(a crashed owner's unacked batch) before reading new ones, so no turn ever sees a later event
before an earlier one. Then the worker's `Pump` steps every owner it holds: read a batch, fold
it, commit it together with the read of the next one. Reads and commits are fenced by the lease
in their Lua scripts; a lost lease ends the owner. After a connection error the outcome of the
last commit is unknown, so memory is dropped, a new epoch taken and the owner starts over from
the drain: what was committed is in the snapshots and acked, what was not is still pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.fold.applier import (
    BatchStats,
    Decoded,
    Entry,
    PartitionFold,
    Timeouts,
    decode_entries,
    load_turns,
    pairs,
    read_entries,
)
from terminus.service.fold.commit import (
    Batch,
    CommitAlreadyApplied,
    LeaseLost,
    Value,
    commit_ids,
    encode,
)
from terminus.service.keys import GROUP, START, Keys
from terminus.service.metrics.worker import WorkerMetrics
from terminus.service.redis.replies import text
from terminus.service.redis.scripts import script
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.runtime.logs import log_notes
from terminus.service.runtime.stall import StallTimer
from terminus.service.runtime.wire import Call, Wire
from terminus.service.settings import Settings

log = logging.getLogger("terminus.partition")


class PartitionOwner:
    """One partition for `worker_id` while its lease holds `epoch`; stepped by a `Pump`."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        partition: int,
        worker_id: str,
        epoch: int,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.redis = redis
        # The worker's, shared by its owners: commit latencies and lease changes.
        self.metrics = metrics if metrics is not None else WorkerMetrics()
        self.settings = settings
        self.keys = Keys(partition, settings.prefix)
        self.consumer = worker_id
        self.epoch = epoch
        self.lease = lease_value(worker_id, epoch)
        self.leases = Leases(redis, settings.prefix)
        timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
        self.fold = PartitionFold(self.keys, settings.core(), timeouts, settings.session_maxlen)
        self.stalls = StallTimer(redis, self.keys, self.lease, self.fold, settings)
        self.batch: Batch | None = None  # folded, not committed yet
        self.stats = BatchStats()  # of `batch`
        self.ready = False  # the log may hold entries this owner has not read
        self.tail = START  # the last entry id seen: a wait for new entries starts after it
        self.fresh = True  # the group and the drain come first
        self.uncertain = False  # a connection broke: a new epoch before anything else
        self.stopping = False
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def partition(self) -> int:
        return self.keys.partition

    def stop(self) -> None:
        """Commit the batch in hand, then end."""
        self.stopping = True

    def end(self, error: BaseException | None = None) -> None:
        """The owner is done: stopped (None) or failed (`LeaseLost`, a bug)."""
        if self.ended.done():
            return
        if error is None:
            self.ended.set_result(None)
        else:
            self.ended.set_exception(error)
            self.ended.exception()  # the worker reaps it; never "exception was never retrieved"

    @property
    def done(self) -> bool:
        return self.ended.done()

    def lost_connection(self, exc: BaseException) -> None:
        """A request failed on the wire: memory may be ahead of Redis, start over."""
        if not self.uncertain:
            log.warning("partition %s: %r; starting over", self.partition, exc)
        self.fold.forget()
        self.batch = None
        self.fresh = self.uncertain = True

    async def start(self) -> None:
        """A new epoch if the last connection broke, the consumer group, then the drain."""
        if self.uncertain:
            await self._refence()
            self.uncertain = False
        with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists already
            await self.redis.xgroup_create(self.keys.inbound, GROUP, id=START, mkstream=True)
        await self.drain()
        self.fresh, self.ready = False, True

    async def _refence(self) -> None:
        """A new epoch before starting over: a request still in flight on the broken connection
        carries the old lease value, so if it reaches Redis later it writes and moves nothing."""
        epoch = await self.leases.rotate(self.partition, self.consumer, self.epoch)
        if epoch is None:
            raise LeaseLost(self.partition, self.lease)
        self.epoch, self.lease = epoch, lease_value(self.consumer, epoch)
        self.stalls.lease = self.lease
        self.metrics.lease_changed("rotated")

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
            if start == START or self.stopping:
                return

    async def process(self, entries: Sequence[Entry]) -> BatchStats:
        """Fold a batch and commit it with the acks of all its entries, or raise `LeaseLost`."""
        decoded = self.decode(entries)
        await load_turns(self.redis, self.fold, self.fold.missing(decoded))
        self.fold_batch(decoded)
        assert self.batch is not None
        started = time.perf_counter()
        try:
            ids = await self._commit(self.batch)
        except BaseException:
            self.fold.forget()
            self.batch = None
            raise
        if ids is None:
            self.fold.forget()
            raise LeaseLost(self.partition, self.lease)
        self.metrics.observe_commit(time.perf_counter() - started)
        stats = self.stats
        self.committed()
        return stats

    async def _commit(self, batch: Batch) -> list[str] | None:
        """Commit `batch` alone; with `commit_wait_replicas`, then WAIT as the pump does."""
        if not self.settings.commit_wait_replicas:
            return await commit_ids(self.redis, self.keys, self.lease, batch, self.consumer)
        names, args = encode(batch, self.keys, self.lease, self.consumer, 0)
        [reply], _ = await Wire(self.redis, self.settings).send([("commit", names, args)], {})
        if isinstance(reply, Exception):
            raise reply
        if reply == -1:
            raise CommitAlreadyApplied(f"partition {self.partition}: committed already")
        return None if reply == 0 else [text(i) for i in reply[0]]

    def decode(self, entries: Sequence[Entry]) -> list[Decoded]:
        settings = self.settings
        return decode_entries(entries, settings.max_deliveries, max_bytes=settings.max_event_bytes)

    def fold_batch(self, decoded: list[Decoded]) -> None:
        """Fold decoded entries (their turns loaded) into the batch to commit next."""
        self.batch, self.stats = self.fold.apply(decoded)

    def step_call(self) -> Call:
        """The next request: commit the batch in hand and read the next, or only read."""
        count = 0 if self.stopping else self.settings.batch_size
        if self.batch is None:
            return "read", [self.keys.lease, self.keys.inbound], [*self._fence(), count]
        names, args = encode(self.batch, self.keys, self.lease, self.consumer, count)
        return "commit", names, args

    def stepped(self, reply: Any, seconds: float = 0.0) -> list[Entry]:
        """Take the reply of `step_call`'s request, which took `seconds` to come back;
        returns the entries it read."""
        if reply == 0:
            self.fold.forget()
            raise LeaseLost(self.partition, self.lease)
        if reply == -1:
            raise CommitAlreadyApplied(f"partition {self.partition}: committed already")
        if self.batch is not None:
            self.metrics.observe_commit(seconds)
            self.committed()
            reply = reply[1:]
        ids, payloads, tail = reply
        entries = read_entries(ids, payloads)
        self.tail = entries[-1].id if entries else text(tail) or self.tail
        self.ready = bool(entries)
        return entries

    def committed(self) -> None:
        self.fold.settle()
        self.stalls.committed()
        self.batch = None
        self._count(self.stats)

    def _count(self, stats: BatchStats) -> None:
        context = {"partition": self.partition, "worker": self.consumer}
        for reason in stats.dead_reasons:
            log.warning("partition %s: dead letter: %s", self.partition, reason, extra=context)
        log_notes(log, stats.notes, self.partition, self.consumer)

    def _fence(self) -> list[Value]:
        return [self.lease, GROUP, self.consumer]

    async def _call(self, name: str, *args: Value) -> Any:
        keys = [self.keys.lease, self.keys.inbound]
        reply = await script(self.redis, name)(keys=keys, args=[*self._fence(), *args])
        if reply == 0:
            raise LeaseLost(self.partition, self.lease)
        return reply


def _entry(row: list[Any], deliveries: dict[str, int]) -> Entry:
    """An entry from claim.lua's reply: [id, [f1, v1, ...]], fields false if deleted."""
    entry_id = text(row[0])
    flat = row[1] if len(row) > 1 else None
    fields = pairs(flat) if flat else None
    return Entry(entry_id, fields, deliveries.get(entry_id, 1))
