"""The owner of one partition at one lease epoch: its fold, its place in the log, its next step.

Order of work (DESIGN section 5): on taking the partition, claim and apply every pending entry
(a crashed owner's unacked batch) before reading new ones, so no turn ever sees a later event
before an earlier one. Then the worker's `Pump` steps every owner it holds: read a batch, fold
it, commit it together with the read of the next one. Reads and commits are fenced by the lease
in their Lua scripts; a lost lease ends the owner. After a connection error the outcome of the
last commit is unknown, so memory is dropped, a new epoch taken and the owner starts over from
the drain: what was committed is in the snapshots and acked, what was not is still pending.

An owner's phase (`Phase`) is data, as a turn's state is, and this module alone moves it
(`MOVES`); the pump asks an owner what it needs next and tells it what happened, and never sets
its state itself. Stopping is a request on top of the phase: an owner holding a folded batch
commits it first; any other ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from enum import Enum
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service import TerminusError
from terminus.service.fold.applier import (
    BatchStats,
    Decoded,
    Entry,
    PartitionFold,
    Timeouts,
    decode_entries,
    pairs,
    read_entries,
)
from terminus.service.fold.commit import (
    Batch,
    CommitAlreadyApplied,
    LeaseLost,
    Value,
    commit,
    committed_ids,
    encode,
)
from terminus.service.fold.cycle import fold_and_commit
from terminus.service.keys import GROUP, START, Keys
from terminus.service.metrics.worker import WorkerMetrics
from terminus.service.redis.replies import text
from terminus.service.redis.scripts import script
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.runtime.logs import log_notes
from terminus.service.runtime.stall import StallTimer
from terminus.service.runtime.wire import Call, Probe, Wire
from terminus.service.settings import Settings

log = logging.getLogger("terminus.partition")


class Phase(Enum):
    START = "start"  # new: the group, then the drain of pending entries, before anything else
    RESTART = "restart"  # a request broke: a new epoch first, then as START
    READ = "read"  # the log may hold entries this owner has not read: read next
    WAIT = "wait"  # caught up: waits, with the pump's other idle owners, for its log to grow
    COMMIT = "commit"  # holds a folded batch: commit it (with the read of the next) next
    ENDED = "ended"


# (phase, what happened) -> next phase. Anything else is a bug, raised at once (`_move`).
MOVES: Final[dict[tuple[Phase, str], Phase]] = {
    (Phase.START, "started"): Phase.READ,
    (Phase.RESTART, "started"): Phase.READ,
    (Phase.READ, "read"): Phase.READ,
    (Phase.READ, "caught_up"): Phase.WAIT,
    (Phase.READ, "folded"): Phase.COMMIT,
    (Phase.COMMIT, "read"): Phase.READ,  # committed, and read the next entries
    (Phase.COMMIT, "caught_up"): Phase.WAIT,  # committed, and nothing new was there
    (Phase.WAIT, "woken"): Phase.READ,
    **{(phase, "broke"): Phase.RESTART for phase in Phase if phase is not Phase.ENDED},
    **{(phase, "ended"): Phase.ENDED for phase in Phase if phase is not Phase.ENDED},
}
STARTING: Final = frozenset((Phase.START, Phase.RESTART))


class PhaseError(TerminusError, AssertionError):
    """A move the table does not have: a bug of the pump or the owner."""


def moved(phase: Phase, happened: str) -> Phase:
    try:
        return MOVES[phase, happened]
    except KeyError:
        raise PhaseError(f"{happened!r} cannot happen in phase {phase.value}") from None


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
        self.worker_id = worker_id
        self.epoch = epoch
        self.lease = lease_value(worker_id, epoch)
        self.leases = Leases(redis, settings.prefix)
        timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
        self.fold = PartitionFold(self.keys, settings.core(), timeouts, settings.session_maxlen)
        self.stalls = StallTimer(redis, self.keys, self.lease, self.fold, settings)
        self.phase = Phase.START
        self.stopping = False  # asked to stop: commit the batch in hand, then end
        self.batch: Batch | None = None  # folded by the pump, not committed yet (COMMIT)
        self.stats = BatchStats()  # of `batch`
        self.tail = START  # the last entry id seen: a wait for new entries starts after it
        # `tail` as read in this epoch: a read may then learn in one call that nothing is new
        # (next_entries.lua, `unchanged`). Not across a restart, which may have lost deliveries.
        self.seen = ""
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def partition(self) -> int:
        return self.keys.partition

    def _move(self, happened: str) -> None:
        self.phase = moved(self.phase, happened)

    # What the pump asks.

    @property
    def starting(self) -> bool:
        """Needs `start()` before anything else."""
        return self.phase in STARTING and not self.stopping

    @property
    def busy(self) -> bool:
        """Has a request to make this round (`step_call`)."""
        return self.phase is Phase.COMMIT or (self.phase is Phase.READ and not self.stopping)

    @property
    def holds_batch(self) -> bool:
        """Has a folded batch to commit (its next request is a commit)."""
        return self.phase is Phase.COMMIT

    @property
    def idle(self) -> bool:
        """Waits for its log to grow."""
        return self.phase is Phase.WAIT and not self.stopping

    @property
    def finished(self) -> bool:
        """Ended, or asked to stop with nothing left to commit: the pump lets it go."""
        return self.phase is Phase.ENDED or (self.stopping and self.phase is not Phase.COMMIT)

    @property
    def renewing(self) -> bool:
        """Running on its lease: the worker renews it."""
        return self.phase not in STARTING and self.phase is not Phase.ENDED and not self.stopping

    def stalls_due(self, now: float) -> bool:
        """Its stall scan is due at `now` (monotonic; never while it starts or stops)."""
        return self.phase not in STARTING and not self.stopping and self.stalls.due_in(now) <= 0

    # What the pump tells it.

    def stop(self) -> None:
        """Commit the batch in hand, then end."""
        self.stopping = True

    def woken(self) -> None:
        """Its log grew while it waited."""
        if self.phase is Phase.WAIT:
            self._move("woken")

    def end(self, error: BaseException | None = None) -> None:
        """The owner is done: stopped (None) or failed (`LeaseLost`, a bug); what it folded
        and did not commit is dropped."""
        if self.ended.done():
            return
        self.fold.forget()
        self.batch = None
        self._move("ended")
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
        if self.phase is Phase.ENDED:
            return
        if self.phase is not Phase.RESTART:
            log.warning("partition %s: %r; starting over", self.partition, exc)
        self.fold.forget()
        self.batch = None
        self._move("broke")

    async def start(self) -> None:
        """A new epoch if the last connection broke, the consumer group, then the drain."""
        self.seen = ""
        if self.phase is Phase.RESTART:
            await self._refence()
        with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists already
            await self.redis.xgroup_create(self.keys.inbound, GROUP, id=START, mkstream=True)
        await self.drain()
        if self.phase is not Phase.ENDED:  # dropped meanwhile: its lease went while it drained
            self._move("started")

    async def _refence(self) -> None:
        """A new epoch before starting over: a request still in flight on the broken connection
        carries the old lease value, so if it reaches Redis later it writes and moves nothing."""
        epoch = await self.leases.rotate(self.partition, self.worker_id, self.epoch)
        if epoch is None:
            raise LeaseLost(self.partition, self.lease)
        self.epoch, self.lease = epoch, lease_value(self.worker_id, epoch)
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
        stats = await fold_and_commit(self.redis, self.fold, self.decode(entries), self._commit)
        self.stalls.committed()
        self._count(stats)
        return stats

    async def _commit(self, batch: Batch) -> None:
        """Commit `batch` alone; with `commit_wait_replicas`, then WAIT as the pump does."""
        started = time.perf_counter()
        if not self.settings.commit_wait_replicas:
            await commit(self.redis, self.keys, self.lease, batch, self.worker_id)
        else:
            names, args = encode(batch, self.keys, self.lease, self.worker_id, 0)
            wire = Wire(self.redis, self.settings, own_connection=False)  # one request
            [reply] = (await wire.send([("commit", names, args)])).replies
            if isinstance(reply, Exception):
                raise reply
            committed_ids(reply, self.keys, self.lease)
        self.metrics.observe_commit(time.perf_counter() - started)

    def decode(self, entries: Sequence[Entry]) -> list[Decoded]:
        settings = self.settings
        return decode_entries(entries, settings.max_deliveries, max_bytes=settings.max_event_bytes)

    def fold_batch(self, decoded: list[Decoded]) -> None:
        """Fold decoded entries (their turns loaded) into the batch to commit next."""
        self.batch, self.stats = self.fold.apply(decoded)
        self._move("folded")

    def lacking(self, decoded: list[Decoded]) -> list[str]:
        """The turns of `decoded` the fold has not loaded: their snapshots must be read first."""
        return self.fold.missing(decoded)

    def snapshot_keys(self, turn_ids: list[str]) -> list[str]:
        return self.fold.snapshot_keys(turn_ids)

    def loaded(self, turn_ids: list[str], found: list[bytes | None]) -> None:
        """The MGET reply of `snapshot_keys(turn_ids)` (raises on an unreadable snapshot)."""
        self.fold.loaded(turn_ids, found)

    def step_call(self) -> Call:
        """The next request: commit the batch in hand and read the next, or only read."""
        count = 0 if self.stopping else self.settings.batch_size
        if self.batch is None:
            read: list[Value] = [*self._fence(), count]
            if self.seen:
                read.append(self.seen)
            return "read", [self.keys.lease, self.keys.inbound], read
        names, args = encode(self.batch, self.keys, self.lease, self.worker_id, count, self.seen)
        return "commit", names, args

    def probe(self) -> Probe:
        """What the round needs to read this idle owner's log only if it grew (`Probe`)."""
        return Probe(self.keys.lease, self.keys.inbound, self.lease, self.worker_id, self.tail)

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
            self._committed()
            reply = reply[1:]
        ids, payloads, tail = reply
        entries = read_entries(ids, payloads)
        told = entries[-1].id if entries else text(tail)
        if told:  # '' only after a commit that read nothing (count 0)
            self.tail = self.seen = told
        self._move("read" if entries else "caught_up")
        return entries

    def _committed(self) -> None:
        self.fold.settle()
        self.stalls.committed()
        self.batch = None
        self._count(self.stats)

    def _count(self, stats: BatchStats) -> None:
        context = {"partition": self.partition, "worker": self.worker_id}
        for reason in stats.dead_reasons:
            log.warning("partition %s: dead letter: %s", self.partition, reason, extra=context)
        log_notes(log, stats.notes, self.partition, self.worker_id)

    def _fence(self) -> list[Value]:
        return [self.lease, GROUP, self.worker_id]

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
