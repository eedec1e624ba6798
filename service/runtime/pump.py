"""Every partition a worker owns, stepped in one loop: one pipelined request per round while any
of them has work, one blocking XREAD over all of them while none has.

Why one loop rather than a task per partition: with a task each, at half load every partition
woke on its own for a few entries and spent three requests on them (wait, read, commit), each
about 90 µs of client CPU; the worker saturated at half its drain rate and added a p99 of 280 ms
(docs/performance.md). A round sends one call of round.lua that runs each busy owner's read or
its commit joined with the read of its next batch (commit.lua does both), and probes every idle
owner: one XREAD over their logs, inside the call, tells which grew, and only those are read, in
the same call. So a round touches only the partitions it carries: an idle owner with nothing new
costs its two keys and three values in the call, and no lease GET, XRANGE or reply of its own.
At light load rounds go at most every linger (`_pace`), so that a round's fixed cost (a round
trip, a script call) is shared by what gathered meanwhile. Owners still run independently: each
has its own lease, fold and position, and one owner's lost lease or failed commit ends only that
owner.

On a Redis Cluster the round and the wait go per slot (service/runtime/wire.py). There a probe
is a non-blocking XREAD of its own, which only tells that a log grew: its owner reads in the next
round, and while entries flow every caught-up owner reads again rather than waiting to be told
(`_rouse`).

Errors: any connection error, and any unexpected error in a round, makes every owner of the
pump start over (`PartitionOwner.lost_connection`: a new epoch, its fold reloaded, its pending
entries drained), the idle ones too. A busy owner cannot know what of its request was applied;
an idle one may remember more than Redis holds when the connection broke because Redis restarted
and lost acknowledged writes (AOF `everysec` behind a slow fsync), or a replica that had not
received them took over: its position would then wait past entries that are back in the log, and
its fold would drop them as already applied. (A server cannot restart or fail over without
breaking the connections to it, so the error is always seen, by some lane: every lane of the
worker then starts over too (`Breaks`).)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from redis.asyncio import Redis

from terminus.service.fold.applier import Decoded, Entry
from terminus.service.fold.commit import CommitAlreadyApplied, LeaseLost
from terminus.service.redis.connect import TRANSIENT
from terminus.service.redis.replies import StreamReply
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.stall import scan_all
from terminus.service.runtime.wire import Sent, Wire
from terminus.service.settings import Settings

log = logging.getLogger("terminus.pump")

PAUSE_S: Final = 0.2  # after a connection error, before the next round
# What a frame takes to reach a reader beyond its two lingers (the commit's round trip, the
# reader's XREAD): the p99 added measured about two lingers plus this (docs/performance.md).
SLACK_S: Final = 0.003
ROUND_WEIGHT: Final = 0.2  # of the last round in the running mean of a round's time


class Breaks:
    """How often a connection of a worker's lanes broke, shared by its pumps: after any lane's,
    every lane's owners start over, each at the top of its next round or before its next send.

    Why every lane: a broken connection may mean a Redis that restarted, or a replica promoted,
    without writes the owners remember (the module's docstring). A lane sees the break on its own
    connection only when it next uses it, and that may never come for some owners: on one Redis,
    an owner handed at the top of its lane's round to a lane that already started over and
    reconnected; on a cluster, every lane whose next request for a slot goes to the promoted
    replica once another lane has re-read the slot map. Such an owner would go on from memory
    that Redis no longer holds."""

    def __init__(self) -> None:
        self.count = 0


class Pump:
    """Steps the owners it holds until `stop`; `balance`, if given, is called at the top of
    every round, the one point where none of the pump's owners has a request in flight (the
    worker's lanes hand owners over there: service/runtime/lanes.py)."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        balance: Callable[[Pump], None] | None = None,
        breaks: Breaks | None = None,
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.wire = Wire(redis, settings)
        self.owners: dict[int, PartitionOwner] = {}
        self.running = False
        self.last_read = 0  # entries the last round read, all owners together
        self.full_rounds = 0  # rounds in a row that came back full, the last one included
        self.stopping = False
        self._balance = balance
        self._breaks = breaks if breaks is not None else Breaks()
        self._breaks_known = self._breaks.count  # the breaks this pump's owners started over for
        self._changed = asyncio.Event()  # an owner came, or was asked to go: end the wait
        self._paced: asyncio.Future[None] | None = None  # the linger in progress (`_pace`)
        self._paced_from = 0.0  # monotonic time of the last round, or wake-up (`_pace`)
        self.round_s = 0.0  # running mean of a round's time, its fold included (`linger_s`)

    @property
    def full(self) -> bool:
        """The last round read a load (a quarter of a batch): the next one does not linger."""
        return self.last_read >= self.settings.batch_size // 4

    def tally(self, read: int) -> None:
        """What a round read, all owners together (a wait reads nothing)."""
        self.last_read = read
        self.full_rounds = self.full_rounds + 1 if self.full else 0

    def add(self, owner: PartitionOwner) -> None:
        self.owners[owner.partition] = owner
        self._nudge()

    def release(self, owner: PartitionOwner) -> None:
        """Let an owner go to another pump, as it is: only at the top of a round (`balance`),
        when nothing of it is in flight."""
        del self.owners[owner.partition]

    def drop(self, partition: int) -> None:
        """End an owner at once, without a last commit: its lease is gone."""
        owner = self.owners.pop(partition, None)
        if owner is not None:
            owner.end()
            self._nudge()

    async def retire(self, partition: int) -> None:
        """Commit the owner's batch in hand, then end it; returns once it has ended."""
        owner = self.owners.get(partition)
        if owner is None:
            return
        idle = owner.idle
        owner.stop()
        if idle or not self.running:
            # Nothing in hand and no request of it in flight (an idle owner is only watched by
            # the read-only XREAD): end it now rather than wait for that XREAD to return.
            self._end(owner)
            return
        self._nudge()
        with contextlib.suppress(Exception):
            await asyncio.shield(owner.ended)

    def stop(self) -> None:
        self.stopping = True
        self._nudge()

    def _nudge(self) -> None:
        """An owner came, or was asked to go: end a wait or a linger now."""
        self._changed.set()
        if self._paced is not None:
            _resolve(self._paced)

    async def run(self) -> None:
        """Round after round until `stop`; a bug in a round is logged, never fatal."""
        self.running = True
        try:
            while not self.stopping:
                try:
                    await self.round()
                except Exception as exc:
                    # Owners may have read entries, or folded a batch, that this round will never
                    # commit: left as they are, their folds would run ahead of Redis and the next
                    # read would skip those entries. Each starts over from what Redis holds.
                    log.exception("pump: round failed")
                    await self._start_over(exc)
        finally:
            self.running = False
            for owner in list(self.owners.values()):
                self._end(owner)
            await self.wire.close()

    async def round(self) -> None:
        self._changed.clear()
        for owner in list(self.owners.values()):
            if owner.finished:
                self._end(owner)
        if await self._after_a_break():
            return
        if self._balance is not None:
            self._balance(self)
        await self._start_fresh()
        await self._tick_stalls()
        if self.last_read and self.wire.cluster:
            self._rouse()
        busy = [o for o in self.owners.values() if o.busy]
        idle = [o for o in self.owners.values() if o.idle]
        if busy:
            await self._pace()
            if await self._after_a_break():  # another lane's, during the linger
                return
            await self._step(busy, idle)
        else:
            await self._wait(idle)

    def _rouse(self) -> None:
        """On a cluster, while entries flow, every caught-up owner reads again next round: asking
        is cheaper than learning from an XREAD that its log grew and reading in the round after."""
        for owner in self.owners.values():
            if owner.idle:
                owner.woken()

    async def _start_fresh(self) -> None:
        """Take over new owners (and restart broken ones): new epoch, group, drain."""
        for owner in [o for o in self.owners.values() if o.starting]:
            try:
                await owner.start()
            except TRANSIENT as exc:
                await self._start_over(exc)
                return
            except Exception as exc:  # LeaseLost, or a bug: the worker reaps and logs it
                self._end(owner, exc)

    async def _tick_stalls(self) -> None:
        """Every owner whose stall scan is due scans, all in one (`scan_all`)."""
        now = time.monotonic()
        due = [o for o in self.owners.values() if o.stalls_due(now)]
        if not due:
            return
        try:
            outcomes: Sequence[int | Exception] = await scan_all(
                self.redis, [o.stalls for o in due]
            )
        except TRANSIENT as exc:  # appends are fenced and at most once per position
            await self._start_over(exc)
            return
        except Exception as exc:  # the server's clock could not be read: no scan was made
            outcomes = [exc] * len(due)
        for owner, outcome in zip(due, outcomes, strict=True):
            if isinstance(outcome, Exception):
                self._end(owner, outcome)

    async def _step(self, busy: list[PartitionOwner], idle: list[PartitionOwner]) -> None:
        """One pipeline: each busy owner's read or commit-and-read, one XREAD for the idle."""
        started = time.perf_counter()
        await self._send_and_fold(busy, idle, started)
        took = time.perf_counter() - started
        self.round_s += ROUND_WEIGHT * (took - self.round_s)

    async def _send_and_fold(
        self, busy: list[PartitionOwner], idle: list[PartitionOwner], started: float
    ) -> None:
        calls = [owner.step_call() for owner in busy]
        try:
            sent = await self.wire.send(calls, [owner.probe() for owner in idle])
        except TRANSIENT as exc:
            await self._start_over(exc)
            return
        # A commit's latency is its pipeline's round trip: what the owner waited for it.
        seconds = time.perf_counter() - started
        answered = _answered(busy, idle, sent)
        broken = next((r for _, r in answered if isinstance(r, TRANSIENT)), None)
        if broken is not None:  # one node's, on a cluster: what the others committed stands
            await self._start_over(broken)
            return
        read: list[tuple[PartitionOwner, list[Entry]]] = []
        for owner, reply in answered:
            if owner.done:
                continue  # dropped while its request was in flight
            if isinstance(reply, Exception):  # e.g. WRONGTYPE from the commit's checks
                self._end(owner, reply)
            else:
                try:
                    entries = owner.stepped(reply, seconds)
                except LeaseLost as exc:
                    self._end(owner, exc)
                    continue
                except CommitAlreadyApplied as exc:  # a re-sent commit: this owner starts over
                    owner.lost_connection(exc)
                    continue
                if entries:
                    read.append((owner, entries))
        self.tally(sum(len(entries) for _, entries in read))
        self._wake(sent.woken, idle)
        await self._fold(read)

    async def _fold(self, read: list[tuple[PartitionOwner, list[Entry]]]) -> None:
        """Decode and fold what each owner read, loading the turns they lack in one pipeline."""
        decoded = [(owner, owner.decode(entries)) for owner, entries in read]
        lacking = [(owner, owner.lacking(items), items) for owner, items in decoded]
        loads = [(owner, missing) for owner, missing, _ in lacking if missing]
        if loads:
            try:
                snapshots = await self.wire.load([o.snapshot_keys(m) for o, m in loads])
            except TRANSIENT as exc:
                await self._start_over(exc)
                return
            for (owner, missing), found in zip(loads, snapshots, strict=True):
                try:
                    owner.loaded(missing, found)
                except Exception as exc:  # an unreadable snapshot: this owner cannot go on
                    self._end(owner, exc)
        for owner, _, items in lacking:
            if not owner.done:
                self._fold_one(owner, items)

    def _fold_one(self, owner: PartitionOwner, items: list[Decoded]) -> None:
        try:
            owner.fold_batch(items)
        except Exception as exc:  # the fold dead-letters what the core rejects: this is a bug
            self._end(owner, exc)

    def _wake(self, woken: StreamReply, idle: Sequence[PartitionOwner]) -> None:
        if not woken:  # always, on one Redis: its rounds read grown logs at once
            return
        by_stream = {o.keys.inbound.encode(): o for o in idle}
        for stream, _ in woken:
            owner = by_stream.get(stream)
            if owner is not None:
                owner.woken()

    async def _wait(self, idle: list[PartitionOwner]) -> None:
        """Until an idle partition's log grows, an owner comes or goes, or a stall scan is due."""
        self.tally(0)
        due = min((o.stalls.due_in() for o in idle), default=self.settings.block_ms / 1000)
        block_ms = max(1, int(min(self.settings.block_ms / 1000, due) * 1000))
        changed = asyncio.ensure_future(self._changed.wait())
        waits: set[asyncio.Future[Any]] = {changed}
        if idle:
            streams = {o.keys.inbound: o.tail for o in idle}
            reading = asyncio.ensure_future(self.wire.wait(streams, block_ms))
            waits.add(reading)
        await asyncio.wait(waits, timeout=block_ms / 1000 + 1, return_when="FIRST_COMPLETED")
        nudged = changed.done()
        changed.cancel()
        if not idle:
            return
        if not reading.done():
            reading.cancel()  # redis-py drops the connection of a cancelled command
            with contextlib.suppress(asyncio.CancelledError, *TRANSIENT):
                await reading
            if not nudged:  # a blocking read a second past its time: the connection is dead
                await self._start_over(TimeoutError("a blocking read did not come back"))
            return
        try:
            self._wake(reading.result(), idle)
        except TRANSIENT as exc:
            await self._start_over(exc)
            return
        self._paced_from = time.monotonic()  # the woken owners' round reads what gathers

    async def _pace(self) -> None:
        """Rounds at light load go at most every linger (`linger_s`; in the spirit of Kafka's
        linger.ms): a round costs about the same for one entry as for hundreds, so a round that
        follows closely on the last, or on a wake-up, waits for the rest of the linger and carries
        what gathered meanwhile. A round after one that read a load (a quarter of a batch) goes at
        once: under load rounds are full and never wait. An owner coming or going ends the wait.
        The price is latency: an entry waits up to one linger to be read and up to one more for
        its commit (docs/performance.md, "Rounds at light load")."""
        linger_s = self.linger_s()
        if linger_s > 0 and not self.full:
            left = self._paced_from + linger_s - time.monotonic()
            if left > 0 and not self._changed.is_set():
                # A bare future and a timer: this wait comes before most rounds at light load,
                # and asyncio.wait_for would add a task and two turns of the event loop to each.
                self._paced = asyncio.get_running_loop().create_future()
                timer = asyncio.get_running_loop().call_later(left, _resolve, self._paced)
                try:
                    await self._paced
                finally:
                    timer.cancel()
                    self._paced = None
        self._paced_from = time.monotonic()

    def linger_s(self) -> float:
        """`linger_ms` if set; else the longest linger that keeps the latency this pump adds
        within `latency_budget_ms`. Lingers count from a round's start: an entry waits up to one
        to be read and up to another for the round that commits it, then for that round's reply
        and a reader's read. So half of what the budget leaves after a round and the slack, and
        none once rounds take the budget themselves (under load they seldom wait anyway)."""
        if self.settings.linger_ms is not None:
            return self.settings.linger_ms / 1000
        budget_s = self.settings.latency_budget_ms / 1000
        return max(0.0, (budget_s - SLACK_S - self.round_s) / 2)

    def _end(self, owner: PartitionOwner, error: BaseException | None = None) -> None:
        if self.owners.get(owner.partition) is owner:
            del self.owners[owner.partition]
        owner.end(error)

    async def _after_a_break(self) -> bool:
        """Start over if another lane's connection broke since this pump's owners last did."""
        if self._breaks_known == self._breaks.count:
            return False
        await self._start_over(ConnectionError("another lane's connection broke"), told=True)
        return True

    async def _start_over(self, exc: BaseException, told: bool = False) -> None:
        """Every owner starts over (see the module's docstring), after a pause; on a broken
        connection not `told` of by another lane, every other lane's owners too (`Breaks`)."""
        if isinstance(exc, TRANSIENT) and not told:
            self._breaks.count += 1
        self._breaks_known = self._breaks.count
        for owner in self.owners.values():
            owner.lost_connection(exc)
        await self.wire.recover(exc)
        await self._pause()

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), PAUSE_S)


def _answered(
    busy: list[PartitionOwner], idle: list[PartitionOwner], sent: Sent
) -> list[tuple[PartitionOwner, Any]]:
    """Each busy owner with its call's reply, then each probed owner whose log grew with the
    read of it, that owner woken (it reads as a busy owner does)."""
    answered = list(zip(busy, sent.replies, strict=True))
    for n, reply in sent.read.items():
        if 0 <= n < len(idle):
            idle[n].woken()
            answered.append((idle[n], reply))
    return answered


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
