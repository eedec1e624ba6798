"""One atomic, lease-fenced commit per batch (DESIGN section 5, invariant 7).

A `Batch` collects everything one read batch produced: session frames, turn snapshots,
persisted messages, partial records, producer commands, dead letters and the inbound entry ids
to XACK. `commit` sends it as a single EVALSHA of `service/redis/lua/commit.lua`, whose header
documents the argument encoding: KEYS are the lease, the inbound stream and every written key
once; ARGV is the lease value, the group, the consumer, how many entries to read next, and the
acks and ops packed in one MessagePack array. The script writes
everything and acks, or, when the lease no longer holds the caller's value, nothing at all.

Entry layout: frames, commands and transitions carry one field, `e`, holding JSON bytes (as
inbound entries do); dead letters carry `raw`, `reason`, `source_stream` and `source_id`.
Snapshots are msgpack and stay after a turn is final (late events are then recognized, and the
turn can be inspected) until the archiver's release replaces them with a tombstone
(service/retention/records.py); the open-turns sorted set lists only live turns, scored by the time
at which the stall timer may act on them. Domain counters are added to the partition's metrics hash
(HINCRBY) in the same commit, so they count exactly what was committed (docs/metrics.md).

Errors:
    LeaseLost              the lease changed hands; nothing of the batch was written or acked
    CommitAlreadyApplied   the batch was applied already (a re-sent request); nothing written
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from terminus.events.codec import encode_json, encode_msgpack
from terminus.events.outbound import SessionUpdate
from terminus.service import TerminusError
from terminus.service.fold.snapshots import Stored
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.scripts import script
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.projection import message_id_of
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn

UNCAPPED: Final = 0
TRANSITIONS_MAXLEN: Final = 100_000
COMMANDS_MAXLEN: Final = 100_000  # producers read commands as they come; a cap bounds memory
MARKED: Final = frozenset({"K", "T"})  # ops whose second operand is a marks key
pack = msgspec.msgpack.Encoder().encode  # a script's MessagePack argument (see packable)

Value = bytes | str | int
Op = tuple[str, str, tuple[Value, ...]]  # opcode of commit.lua, key, operands


class LeaseLost(TerminusError):
    """The partition's lease no longer holds `lease_value`: this worker must stop writing."""

    def __init__(self, partition: int, lease_value: str) -> None:
        super().__init__(f"lease of partition {partition} is no longer {lease_value!r}")
        self.partition = partition
        self.lease_value = lease_value


@dataclass
class Batch:
    """What one batch writes and acks; committed all at once or not at all."""

    ops: list[Op] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)

    @property
    def frame_count(self) -> int:
        """How many session frames the batch adds; `commit` returns one id for each."""
        return sum(1 for op, _, _ in self.ops if op == "F")

    def ack(self, *entry_ids: str) -> None:
        """XACK these inbound entries in the same commit as the writes they caused."""
        self.acks.extend(entry_ids)

    def add_frame(self, keys: Keys, frame: SessionUpdate, maxlen: int) -> None:
        """Append `frame` to its session stream, capped at about `maxlen` entries."""
        # `_xadd` spelled out for its one field: a frame per delta, the fold's most common op.
        key = keys.session(frame.session_id)
        self.ops.append(("F", key, (maxlen, 1, FIELD, encode_json(frame))))

    def add_outputs(
        self,
        outputs: Outputs,
        keys: Keys,
        session_maxlen: int,
        message_ms: Sequence[int] = (),
    ) -> None:
        """Transitions, frames, commands, messages and partials of `outputs`, in that order.

        Transitions first: a script can span a millisecond, and the ids of a commit's frames must
        not be older than those of its state changes, or the timeline
        (`service/gateway/timeline.py`) would show a consequence before its cause.

        `message_ms[i]` orders `outputs.messages[i]` in its session (0 if not given); the first
        commit of a message keeps its place.
        """
        for transition in outputs.transitions:
            self._xadd("X", keys.transitions, TRANSITIONS_MAXLEN, {FIELD: encode_json(transition)})
        for frame in outputs.frames:
            self.add_frame(keys, frame, session_maxlen)
        for command in outputs.commands:
            self._xadd("X", keys.commands, COMMANDS_MAXLEN, {FIELD: encode_json(command)})
        for n, message in enumerate(outputs.messages):
            key = keys.messages(message.session_id)
            self.ops.append(("H", key, (message.message_id, encode_json(message))))
            order = keys.message_order(message.session_id)
            at_ms = message_ms[n] if n < len(message_ms) else 0
            self.ops.append(("N", order, (at_ms, message.message_id)))
        for partial in outputs.partials:
            key = keys.partials(partial.session_id)
            self.ops.append(("H", key, (partial.turn_id, encode_json(partial))))

    def add_turn(
        self, keys: Keys, turn: Turn, deadline_ms: int | None = None, stored: Stored | None = None
    ) -> None:
        """Store the snapshot (whole, or as `stored` plans it: see service/fold/snapshots.py); an
        open turn is listed under `deadline_ms` (None: keep its score), a final one unlisted."""
        stored = stored or Stored(encode_msgpack(turn), drop_tail=True)
        self.ops.append(("S", keys.turn(turn.turn_id), (stored.base,)))
        if stored.tail is not None:
            op = "A" if stored.append else "S"
            self.ops.append((op, keys.tail(turn.turn_id), (stored.tail,)))
        elif stored.drop_tail:
            self.ops.append(("D", keys.tail(turn.turn_id), ()))
        if turn.state in FINAL_STATES:
            self.ops.append(("R", keys.open_turns, (turn.turn_id,)))
        elif deadline_ms is not None:
            self.ops.append(("Z", keys.open_turns, (deadline_ms, turn.turn_id)))

    def count(self, keys: Keys, counts: Mapping[str, int]) -> None:
        """Add `counts` (hash field -> increment) to the partition's metrics hash."""
        for name, n in counts.items():
            self.ops.append(("I", keys.metrics, (name, n)))

    def add_dead(
        self, keys: Keys, raw: bytes, reason: str, source_id: str, source_stream: str = ""
    ) -> None:
        """A dead letter for entry `source_id` of `source_stream` (default: the partition's
        inbound log); ack it too, or it is delivered again."""
        fields: dict[str | bytes, Value] = {
            "raw": raw,
            "reason": reason,
            "source_stream": source_stream or keys.inbound,
            "source_id": source_id,
        }
        self._xadd("X", keys.dead, UNCAPPED, fields)

    def release(self, keys: Keys, turn: Turn, tombstone: bytes, at_ms: int) -> None:
        """Let an archived final turn go: its snapshot becomes `tombstone`, listed in the
        archived set at `at_ms`; its message, its place in the session's order and its partial
        are deleted (service/retention/records.py)."""
        message_id = message_id_of(turn.turn_id)
        self.ops.append(("S", keys.turn(turn.turn_id), (tombstone,)))
        self.ops.append(("D", keys.tail(turn.turn_id), ()))
        # A replay may fold the turn's end in the release's batch, where its own snapshot
        # write (which unlists it) gives way to the tombstone: unlist it here as well.
        self.ops.append(("R", keys.open_turns, (turn.turn_id,)))
        self.ops.append(("Z", keys.archived, (at_ms, turn.turn_id)))
        # The archiver deletes the session's stream once idle (drop_idle_session); it finds the
        # session here, however long after this release that is.
        self.ops.append(("Z", keys.resting, (at_ms, turn.session_id)))
        self.ops.append(("E", keys.messages(turn.session_id), (message_id,)))
        self.ops.append(("R", keys.message_order(turn.session_id), (message_id,)))
        self.ops.append(("E", keys.partials(turn.session_id), (turn.turn_id,)))

    def drop_idle_session(self, keys: Keys, session_id: str, last_frame: bytes) -> None:
        """Delete the session's stream if its last frame is still `last_frame` (no turn wrote
        to it since the archiver judged it idle)."""
        self.ops.append(("L", keys.session(session_id), (last_frame,)))
        self.ops.append(("R", keys.resting, (session_id,)))  # judged: a later release lists it anew

    def mark(self, keys: Keys, stream: str, at_ms: int) -> None:
        """Remember where `stream` (transitions or commands) ends now, under `at_ms`."""
        self.ops.append(("K", stream, (at_ms, keys.marks(stream))))

    def trim_to_mark(self, keys: Keys, stream: str, before_ms: int) -> None:
        """Trim `stream` up to its newest mark scored below `before_ms` (exactly: a replay,
        whose ids differ, trims the same entries, since it marks at the same log positions)."""
        self.ops.append(("T", stream, (before_ms, keys.marks(stream))))

    def forget(self, keys: Keys, turn_id: str) -> None:
        """Delete a released turn's tombstone: from now on its events are of an unknown turn."""
        self.ops.append(("D", keys.turn(turn_id), ()))
        self.ops.append(("R", keys.archived, (turn_id,)))

    def _xadd(self, op: str, key: str, maxlen: int, fields: Mapping[str | bytes, Value]) -> None:
        pairs = [item for pair in fields.items() for item in pair]
        self.ops.append((op, key, (maxlen, len(fields), *pairs)))


def encode(
    batch: Batch, keys: Keys, lease_value: str, consumer: str = "", read: int = 0, seen: str = ""
) -> tuple[list[str], list[Value]]:
    """KEYS and ARGV of commit.lua for `batch`, then a read of up to `read` new entries for
    `consumer` (`seen`: the last entry id it read in its epoch, if known): each key listed once,
    ops pointing at it, all ops and acks in one MessagePack array (see the script's header)."""
    names = [keys.lease, keys.inbound]
    index: dict[str, int] = {}

    def key_index(key: str) -> int:
        k = index.get(key)
        if k is None:
            names.append(key)
            k = index[key] = len(names)  # Lua's KEYS is 1-based
        return k

    ops: list[list[Value | msgspec.Raw]] = []
    for op, key, operands in batch.ops:
        k = key_index(key)
        if op in MARKED:  # the marks key travels as its index in KEYS, as every key does
            ops.append([op, k, str(operands[0]), key_index(str(operands[1]))])
        elif op == "F" or op == "X":  # the field count is implied by the array's length
            ops.append([op, k, str(operands[0]), *map(packable, operands[2:])])
        else:
            ops.append([op, k, *map(packable, operands)])
    blob = pack([batch.acks, ops]) if ops or batch.acks else b""
    args: list[Value] = [lease_value, GROUP, consumer, read, blob]
    if seen:
        args.append(seen)
    return names, args


def packable(value: Value) -> Value | msgspec.Raw:
    """As cmsgpack reads it: byte strings as msgpack str (it has no bin type), ints as text."""
    if type(value) is bytes:
        n = len(value)
        if n < 0x100:
            return msgspec.Raw(_SHORT_HEADERS[n] + value)
        if n < 0x10000:
            return msgspec.Raw(b"\xda" + n.to_bytes(2, "big") + value)
        return msgspec.Raw(b"\xdb" + n.to_bytes(4, "big") + value)
    return str(value) if type(value) is int else value


# msgpack str headers: fixstr below 32 bytes, str8 below 256
_SHORT_HEADERS: Final = [bytes((0xA0 | n,)) if n < 32 else bytes((0xD9, n)) for n in range(256)]


class CommitAlreadyApplied(RedisConnectionError):
    """commit.lua refused a batch it had already applied: a request re-sent by the client
    library. The caller cannot know what its memory matches, so it starts over as after a broken
    connection (hence the base class: every handler of a lost connection handles this too)."""


def committed_ids(reply: Any, keys: Keys, lease_value: str) -> list[str]:
    """commit.lua's reply as the new session-frame ids in order; `LeaseLost` if it wrote nothing
    for want of the lease, `CommitAlreadyApplied` if it had applied this batch already."""
    if reply == -1:
        raise CommitAlreadyApplied(f"partition {keys.partition}: the batch was committed already")
    if not isinstance(reply, list):
        raise LeaseLost(keys.partition, lease_value)
    return [i.decode() if isinstance(i, bytes) else str(i) for i in reply[0]]


async def commit(
    redis: Redis, keys: Keys, lease_value: str, batch: Batch, worker_id: str = ""
) -> list[str]:
    """Commit `batch` atomically and return the new session-frame ids in order. Raises
    `LeaseLost` (nothing written or acked) if the lease no longer holds `lease_value`; with
    `worker_id`, `CommitAlreadyApplied` if the batch was committed already."""
    names, args = encode(batch, keys, lease_value, worker_id)
    return committed_ids(await script(redis, "commit")(keys=names, args=args), keys, lease_value)
