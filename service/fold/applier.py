"""One partition's fold over batches of inbound entries: the pure step between read and commit.

Both the live owner of a partition and `terminus replay` run it, so the same log gives the same
commits. It has no I/O: the caller reads entries (decoded by service/fold/decoding.py, whose names
are re-exported here), loads the snapshots `missing` names, calls `apply`, and commits the
returned `Batch` atomically (DESIGN sections 5 and 6).

Every entry ends in exactly one of three ways (invariant 5): applied, ignored and counted by the
core (duplicate, late, superseded), or dead-lettered with its raw bytes and reason (undecodable,
illegal for the turn, delivered too often, or rejected by a bug in the core). A release entry
of the archiver (service/retention/records.py) lets archived final turns go; events of a released
turn are late, ignored and counted like those of any final turn.

A dead-lettered entry changes no turn and leaves no output (service/fold/rejections.py): after
a bug in the core the turn is rebuilt from its last stored base (`bases`). An event that names
no turn of its session is also answered on the commands stream (`turn_refused`), for a producer
that would otherwise wait for decisions about a turn that is not its own.

Each batch also adds its domain counters (service/metrics/counters.py) to the partition's metrics
hash in the same commit, and lists the turn events the worker logs once it is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from redis.asyncio import Redis

from terminus.events.inbound import InboundEvent
from terminus.service.fold.commit import Batch
from terminus.service.fold.decoding import Decoded as Decoded
from terminus.service.fold.decoding import Entry as Entry
from terminus.service.fold.decoding import decode_entries as decode_entries
from terminus.service.fold.decoding import pairs as pairs
from terminus.service.fold.decoding import read_entries as read_entries
from terminus.service.fold.rejections import rebuilt, refusal
from terminus.service.fold.releases import TOMBSTONE, Release
from terminus.service.fold.snapshots import TailLedger
from terminus.service.keys import Keys
from terminus.service.metrics.counters import (
    DEAD_LETTERS,
    IGNORED,
    Counts,
    Note,
    add,
    count_outcomes,
    dead_class,
    fields,
    observe,
)
from terminus.service.redis.replies import mget
from terminus.statemachines.config import CoreConfig
from terminus.statemachines.errors import CoreError, NoTurnOfSession
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import FINAL_STATES, TurnState
from terminus.statemachines.turn import Turn

# Told of each applied event: its entry id, its turn after it, the batch's outputs so far and
# where they stood before it (`Outputs.lengths()`). A sink reads the rows it writes from them.
Witness = Callable[[str, Turn, Outputs, tuple[int, ...]], None]


class Timeouts(NamedTuple):
    """How long an open turn may stay silent before the stall timer acts on it."""

    stall_ms: int
    tool_ms: int


@dataclass
class BatchStats:
    applied: int = 0
    ignored: int = 0
    dead: int = 0
    frames: int = 0
    dead_reasons: list[str] = field(default_factory=list)
    counts: Counts = field(default_factory=dict)  # what the batch adds to the metrics hash
    notes: list[Note] = field(default_factory=list)  # to log once the batch is committed


def entry_ms(entry_id: str) -> int:
    """The server time (ms) a stream id was assigned at: the log's own, replay-exact clock."""
    return int(entry_id.partition("-")[0])


def deadline_ms(turn: Turn, last_ms: int, timeouts: Timeouts) -> int:
    """When the stall timer may act on an open turn last active at `last_ms`."""
    if turn.state is TurnState.AWAITING_STEP:
        return last_ms + timeouts.tool_ms
    if turn.state is TurnState.RETRYING:
        return last_ms + turn.retry_delay_ms + timeouts.stall_ms
    return last_ms + timeouts.stall_ms


class PartitionFold:
    """The turns of one partition in memory, folded batch by batch into commits."""

    def __init__(
        self,
        keys: Keys,
        config: CoreConfig,
        timeouts: Timeouts,
        session_maxlen: int,
        source_stream: str = "",
    ) -> None:
        self.keys = keys
        self.source_stream = source_stream or keys.inbound  # replay folds another prefix's log
        self.config = config
        self.timeouts = timeouts
        self.session_maxlen = session_maxlen
        self.turns: dict[str, Turn | None] = {}
        self.released: set[str] = set()  # turns whose snapshot is a tombstone (kept with turns)
        self.ledger = TailLedger()
        # Each turn in memory as last loaded or stored: what a bug in the core rolls it back to.
        self.bases: dict[str, bytes] = {}
        self.witness: Witness | None = None  # the workers fold without one

    def missing(self, decoded: Iterable[Decoded]) -> list[str]:
        """Turn ids the batch needs whose snapshot is not in memory yet."""
        wanted = {d.event.turn_id for d in decoded if d.event is not None}
        for d in decoded:
            if d.release is not None:
                wanted.update(d.release.turns)
        return sorted(wanted - self.turns.keys())

    def load(
        self, snapshots: Mapping[str, bytes | None], tails: Mapping[str, bytes | None] | None = None
    ) -> None:
        """Snapshots and their tails by turn id, as stored (service/fold/snapshots.py); None for a
        turn that has none."""
        tails = tails or {}
        for turn_id, raw in snapshots.items():
            self.bases.pop(turn_id, None)
            if raw == TOMBSTONE:
                self.turns[turn_id] = None
                self.released.add(turn_id)
                continue
            if raw is None:
                self.turns[turn_id] = None
                continue
            self.turns[turn_id] = self.ledger.load(raw, tails.get(turn_id))
            self.bases[turn_id] = raw

    def snapshot_keys(self, turn_ids: list[str]) -> list[str]:
        """What to MGET for `loaded`: the turns' snapshots, then their tails."""
        return [self.keys.turn(t) for t in turn_ids] + [self.keys.tail(t) for t in turn_ids]

    def loaded(self, turn_ids: list[str], found: list[bytes | None]) -> None:
        """Take the MGET reply of `snapshot_keys(turn_ids)`."""
        n = len(turn_ids)
        self.load(
            dict(zip(turn_ids, found[:n], strict=True)), dict(zip(turn_ids, found[n:], strict=True))
        )

    def forget(self) -> None:
        """Drop every turn: after a failed or uncertain commit, memory may be ahead of Redis."""
        self.turns.clear()
        self.released.clear()
        self.ledger.forget()
        self.bases.clear()

    def settle(self) -> None:
        """After a commit: final turns leave memory (their snapshots answer late events)."""
        final = [t for t, turn in self.turns.items() if turn is None or turn.state in FINAL_STATES]
        for turn_id in final:
            del self.turns[turn_id]
            self.released.discard(turn_id)
            self.ledger.forget(turn_id)
            self.bases.pop(turn_id, None)

    def apply(self, decoded: list[Decoded]) -> tuple[Batch, BatchStats]:
        """Fold the batch; the Batch writes its outputs, snapshots and dead letters, acks all."""
        run = _Run(decoded=decoded)
        for index, item in enumerate(decoded):
            self._apply_one(index, item, run)
            run.batch.ack(item.entry.id)
        self._write(run)
        stats = run.stats
        stats.frames = run.batch.frame_count
        count_outcomes(stats.counts, stats.applied, stats.ignored, stats.dead, stats.frames)
        for reason in run.ignored:
            add(stats.counts, (IGNORED, "reason", reason))
        run.batch.count(self.keys, fields(stats.counts))
        return run.batch, stats

    def _apply_one(self, index: int, item: Decoded, run: _Run) -> None:
        event = item.event
        if event is None:
            if item.release is not None:
                self._release(item.release, entry_ms(item.entry.id), run)
            elif item.problem is not None:
                self._dead(item, item.problem, run)
            return
        out = run.out
        if event.turn_id in self.released:  # archived once final: late, as for any final turn
            out.ignored.append("late")
            run.stats.ignored += 1
            return
        ignored, messages, transitions = len(out.ignored), len(out.messages), len(out.transitions)
        since = out.lengths() if self.witness is not None else ()
        turn = self._evolve(index, item, event, run)
        if turn is None:
            return
        self.turns[event.turn_id] = turn
        if self.witness is not None:
            self.witness(item.entry.id, turn, out, since)
        if len(out.transitions) > transitions:
            observe(turn, out, transitions, run.stats.counts, run.stats.notes)
        produced = len(out.messages) - messages
        if produced:
            run.message_ms.extend([entry_ms(item.entry.id)] * produced)
        if len(out.ignored) > ignored:
            run.stats.ignored += 1
            run.touched.setdefault(event.turn_id, "")
        else:
            run.stats.applied += 1
            run.touched[event.turn_id] = item.entry.id

    def _evolve(self, index: int, item: Decoded, event: InboundEvent, run: _Run) -> Turn | None:
        """The event folded into its turn, or None once it is dead-lettered (then the turn and
        the outputs are as they were)."""
        out = run.out
        frozen = out.lengths()
        try:
            turn, _ = evolve(self.turns.get(event.turn_id), event, self.config, out)
        except CoreError as exc:
            out.rollback(frozen)  # the core refuses before it appends: kept so by construction
            self._dead(item, f"illegal: {exc}", run)
            if isinstance(exc, NoTurnOfSession):
                out.commands.append(refusal(event, item.entry.id, exc.told))
            return None
        except Exception as exc:  # a bug in the core must not stop the partition
            # What the event appended, and did to its turn, belongs to no applied event.
            out.rollback(frozen)
            self._dead(item, f"internal: {type(exc).__name__}: {exc}", run)
            self._roll_back(event.turn_id, index, run)
            return None
        return turn

    def _roll_back(self, turn_id: str, upto: int, run: _Run) -> None:
        """After a bug in the core: the turn as the batch found it, with the batch's events of
        it before `upto` (not dead-lettered) folded again."""
        earlier = [
            item.event
            for item in run.decoded[:upto]
            if item.event is not None
            and item.event.turn_id == turn_id
            and item.entry.id not in run.dead
        ]
        base = self.bases.get(turn_id)
        self.turns[turn_id] = rebuilt(turn_id, base, self.ledger, earlier, self.config)

    def _release(self, release: Release, at_ms: int, run: _Run) -> None:
        """Archived final turns go; an open, unknown or already released one stays as it is.

        Written at the release's place in the batch, after the outputs of the entries before
        it and before those after it, as if the batch ended here: a replay cuts batches
        elsewhere, and an idle session's stream must be judged on the same last frame."""
        self._flush(run)
        for turn_id in release.turns:
            turn = self.turns.get(turn_id)
            if turn is None or turn.state not in FINAL_STATES:
                continue
            run.touched.pop(turn_id, None)  # its snapshot is not written back after the tombstone
            run.batch.release(self.keys, turn, TOMBSTONE, at_ms)
            self.turns[turn_id] = None
            self.released.add(turn_id)
            self.ledger.forget(turn_id)
            self.bases.pop(turn_id, None)
        for turn_id in release.forget:
            self.turns.pop(turn_id, None)
            self.released.discard(turn_id)
            run.batch.forget(self.keys, turn_id)
        for session_id, last_frame in release.sessions:
            run.batch.drop_idle_session(self.keys, session_id, last_frame)
        for stream in (self.keys.transitions, self.keys.commands):
            if release.archived_to:
                run.batch.trim_to_mark(self.keys, stream, entry_ms(release.archived_to))
            run.batch.mark(self.keys, stream, at_ms)
        run.stats.applied += 1

    def _flush(self, run: _Run) -> None:
        """Write the outputs folded so far."""
        run.batch.add_outputs(run.out, self.keys, self.session_maxlen, run.message_ms)
        run.ignored.extend(run.out.ignored)
        run.out = Outputs()
        run.message_ms = []

    def _dead(self, item: Decoded, reason: str, run: _Run) -> None:
        run.dead.add(item.entry.id)
        run.batch.add_dead(self.keys, item.raw, reason, item.entry.id, self.source_stream)
        run.stats.dead += 1
        run.stats.dead_reasons.append(reason)
        add(run.stats.counts, (DEAD_LETTERS, "reason", dead_class(reason)))

    def _write(self, run: _Run) -> None:
        self._flush(run)
        for turn_id, last_id in run.touched.items():
            turn = self.turns[turn_id]
            assert turn is not None
            deadline = deadline_ms(turn, entry_ms(last_id), self.timeouts) if last_id else None
            stored = self.ledger.store(turn)
            self.bases[turn_id] = stored.base
            run.batch.add_turn(self.keys, turn, deadline, stored)


@dataclass
class _Run:
    """What one `apply` call accumulates."""

    decoded: list[Decoded]
    batch: Batch = field(default_factory=Batch)
    stats: BatchStats = field(default_factory=BatchStats)
    out: Outputs = field(default_factory=Outputs)
    # turn id -> id of its last applied entry ("" if none applied: only ignored or illegal ones)
    touched: dict[str, str] = field(default_factory=dict)
    message_ms: list[int] = field(default_factory=list)  # entry ms of each message in `out`
    ignored: list[str] = field(default_factory=list)  # reasons of the outputs written so far
    dead: set[str] = field(default_factory=set)  # ids of the entries dead-lettered


async def load_turns(redis: Redis, fold: PartitionFold, turn_ids: Iterable[str]) -> None:
    """Bring the snapshots of those turns the fold does not hold yet into it, in one MGET."""
    missing = [t for t in turn_ids if t not in fold.turns]
    if missing:
        fold.loaded(missing, await mget(redis, fold.snapshot_keys(missing)))
