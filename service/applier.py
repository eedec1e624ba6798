"""One partition's fold over batches of inbound entries: the pure step between read and commit.

Both the live owner of a partition and `terminus replay` run it, so the same log gives the same
commits. It has no I/O: the caller reads entries, loads the snapshots `missing` names, calls
`apply`, and commits the returned `Batch` atomically (DESIGN sections 5 and 6).

Every entry ends in exactly one of three ways (invariant 5): applied, ignored and counted by the
core (duplicate, late, superseded), or dead-lettered with its raw bytes and reason (undecodable,
illegal for the turn, delivered too often, or rejected by a bug in the core).

Each batch also adds its domain counters (service/metrics_domain.py) to the partition's metrics
hash in the same commit, and lists the turn events the worker logs once it is committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec

from events.codec import CodecError, decode_event, sniff_format
from events.inbound import InboundEvent
from service.commit import FIELD, Batch
from service.keys import Keys
from service.metrics_domain import (
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
from service.snapshots import TailLedger
from statemachines.config import CoreConfig
from statemachines.errors import CoreError
from statemachines.fold import evolve
from statemachines.outputs import Outputs
from statemachines.states import FINAL_STATES, TurnState
from statemachines.turn import Turn


class Entry(NamedTuple):
    """An inbound stream entry as read: its id, fields (None if deleted), delivery count."""

    id: str
    fields: Mapping[bytes, bytes] | None
    deliveries: int = 1


class Timeouts(NamedTuple):
    """How long an open turn may stay silent before the stall timer acts on it."""

    stall_ms: int
    tool_ms: int


class Decoded(msgspec.Struct):
    """An entry and either its event or the reason it goes to the dead letters (a Struct: its
    C initializer is several times cheaper than a dataclass's, once per entry)."""

    entry: Entry
    event: InboundEvent | None = None
    problem: str | None = None
    raw: bytes = b""


@dataclass
class BatchStats:
    applied: int = 0
    ignored: int = 0
    dead: int = 0
    frames: int = 0
    dead_reasons: list[str] = field(default_factory=list)
    counts: Counts = field(default_factory=dict)  # what the batch adds to the metrics hash
    notes: list[Note] = field(default_factory=list)  # to log once the batch is committed


def read_entries(ids: list[bytes], payloads: list[bytes | list[bytes]]) -> list[Entry]:
    """Entries as read.lua and commit.lua return them: a payload is the value of field `e`, or
    the flat field list of an entry that does not hold exactly that field."""
    return [
        Entry(i.decode(), {FIELD: p} if isinstance(p, bytes) else pairs(p))
        for i, p in zip(ids, payloads, strict=True)
    ]


def pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    """A flat field list [f1, v1, f2, v2, ...] as a mapping."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def entry_ms(entry_id: str) -> int:
    """The server time (ms) a stream id was assigned at: the log's own, replay-exact clock."""
    return int(entry_id.partition("-")[0])


def decode_entries(
    entries: Iterable[Entry], max_deliveries: int, forced: Mapping[str, str] | None = None
) -> list[Decoded]:
    """Decode every entry; `forced` maps entry ids to dead-letter reasons decided earlier."""
    return [_decode(entry, max_deliveries, forced or {}) for entry in entries]


def _decode(entry: Entry, max_deliveries: int, forced: Mapping[str, str]) -> Decoded:
    if entry.fields is None:
        return Decoded(entry)  # deleted while pending: nothing to apply, only to ack
    raw = entry.fields.get(FIELD)
    if raw is None:
        return Decoded(entry, problem="entry has no field 'e'", raw=_fields_bytes(entry.fields))
    if entry.id in forced:
        return Decoded(entry, problem=forced[entry.id], raw=raw)
    if entry.deliveries > max_deliveries:
        reason = f"delivered {entry.deliveries} times (max {max_deliveries})"
        return Decoded(entry, problem=reason, raw=raw)
    try:
        return Decoded(entry, event=decode_event(raw, sniff_format(raw)), raw=raw)
    except CodecError as exc:
        return Decoded(entry, problem=f"undecodable: {exc}", raw=raw)


def _fields_bytes(fields: Mapping[bytes, bytes]) -> bytes:
    return msgspec.json.encode(
        {k.decode("latin-1"): v.decode("latin-1") for k, v in fields.items()}
    )


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
        self.ledger = TailLedger()

    def missing(self, decoded: Iterable[Decoded]) -> list[str]:
        """Turn ids the batch needs whose snapshot is not in memory yet."""
        wanted = {d.event.turn_id for d in decoded if d.event is not None}
        return sorted(wanted - self.turns.keys())

    def load(
        self, snapshots: Mapping[str, bytes | None], tails: Mapping[str, bytes | None] | None = None
    ) -> None:
        """Snapshots and their tails by turn id, as stored (service/snapshots.py); None for a
        turn that has none."""
        tails = tails or {}
        for turn_id, raw in snapshots.items():
            tail = tails.get(turn_id)
            self.turns[turn_id] = None if raw is None else self.ledger.load(raw, tail)

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
        self.ledger.forget()

    def settle(self) -> None:
        """After a commit: final turns leave memory (their snapshots answer late events)."""
        final = [t for t, turn in self.turns.items() if turn is None or turn.state in FINAL_STATES]
        for turn_id in final:
            del self.turns[turn_id]
            self.ledger.forget(turn_id)

    def apply(self, decoded: list[Decoded]) -> tuple[Batch, BatchStats]:
        """Fold the batch; the Batch writes its outputs, snapshots and dead letters, acks all."""
        run = _Run()
        for item in decoded:
            self._apply_one(item, run)
            run.batch.ack(item.entry.id)
        self._write(run)
        stats = run.stats
        stats.frames = run.batch.frame_count
        count_outcomes(stats.counts, stats.applied, stats.ignored, stats.dead, stats.frames)
        for reason in run.out.ignored:
            add(stats.counts, (IGNORED, "reason", reason))
        run.batch.count(self.keys, fields(stats.counts))
        return run.batch, stats

    def _apply_one(self, item: Decoded, run: _Run) -> None:
        event = item.event
        if event is None:
            if item.problem is not None:
                self._dead(item, item.problem, run)
            return
        out = run.out
        ignored, messages, transitions = len(out.ignored), len(out.messages), len(out.transitions)
        try:
            turn, _ = evolve(self.turns.get(event.turn_id), event, self.config, out)
        except CoreError as exc:
            self._dead(item, f"illegal: {exc}", run)
            self._touch_after_error(event.turn_id, run)
            return
        except Exception as exc:  # a bug in the core must not stop the partition
            self._dead(item, f"internal: {type(exc).__name__}: {exc}", run)
            self._touch_after_error(event.turn_id, run)
            return
        self.turns[event.turn_id] = turn
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

    def _touch_after_error(self, turn_id: str, run: _Run) -> None:
        # An illegal event may still move the turn (a gap consumes its seq): store what it did.
        if self.turns.get(turn_id) is not None:
            run.touched.setdefault(turn_id, "")

    def _dead(self, item: Decoded, reason: str, run: _Run) -> None:
        run.batch.add_dead(self.keys, item.raw, reason, item.entry.id, self.source_stream)
        run.stats.dead += 1
        run.stats.dead_reasons.append(reason)
        add(run.stats.counts, (DEAD_LETTERS, "reason", dead_class(reason)))

    def _write(self, run: _Run) -> None:
        run.batch.add_outputs(run.out, self.keys, self.session_maxlen, run.message_ms)
        for turn_id, last_id in run.touched.items():
            turn = self.turns[turn_id]
            assert turn is not None
            deadline = deadline_ms(turn, entry_ms(last_id), self.timeouts) if last_id else None
            run.batch.add_turn(self.keys, turn, deadline, self.ledger.store(turn))


@dataclass
class _Run:
    """What one `apply` call accumulates."""

    batch: Batch = field(default_factory=Batch)
    stats: BatchStats = field(default_factory=BatchStats)
    out: Outputs = field(default_factory=Outputs)
    # turn id -> id of its last applied entry ("" if none applied: only ignored or illegal ones)
    touched: dict[str, str] = field(default_factory=dict)
    message_ms: list[int] = field(default_factory=list)  # entry ms of each message in `out`
