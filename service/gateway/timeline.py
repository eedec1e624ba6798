"""What the inspector and `terminus inspect` show: the recent turns, and one turn's timeline.

A turn's timeline merges, by time, its state changes (the partition's `transitions` stream) and
its session frames other than text chunks (discarded attempts, retries with their delays, tool
calls, errors, commits, the end); chunks are counted per attempt instead of listed, because a turn
has thousands. Times are the stream ids' milliseconds, the server's clock at commit.

Both read only what the workers committed: they never change anything, and on a replayed prefix
they show the replay's view.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final, cast

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import encode_json
from terminus.events.outbound import AgentMessageChunk, AgentThoughtChunk, SessionUpdate
from terminus.service import TerminusError
from terminus.service.fold.releases import TOMBSTONE
from terminus.service.fold.snapshots import TailLedger
from terminus.service.keys import DEFAULT_PREFIX, FIELD, START, Keys, keys_for_session
from terminus.service.redis.connect import execute
from terminus.service.redis.replies import StreamEntry, mget, text, xrange
from terminus.service.sdk.views import frame_of
from terminus.statemachines.outputs import Transition
from terminus.statemachines.turn import Turn

SCAN_PAGE: Final = 1_000
SCAN_LIMIT: Final = 100_000  # transitions read back at most when looking for one turn's
RECENT_PER_PARTITION: Final = 200
CHUNKS: Final = (AgentMessageChunk, AgentThoughtChunk)
_WHERE: Final = "its events are in the archive (TERMINUS_ARCHIVE_DIR)"
# Why an operator reading a released turn gets 410 rather than 404: it existed, and where it went.
ARCHIVED: Final = f"turn archived by retention: {_WHERE}"


class TurnArchived(TerminusError, LookupError):
    """The turn was released by retention: Redis holds only its tombstone, which names no
    session; its events are in the archive (TERMINUS_ARCHIVE_DIR)."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id!r} was archived by retention: {_WHERE}")
        self.turn_id = turn_id


class _SessionOf(msgspec.Struct):
    session_id: str


_transition = msgspec.json.Decoder(Transition)
_session_only = msgspec.msgpack.Decoder(_SessionOf)  # a snapshot's session, nothing else decoded


class TurnSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A turn's latest state change: one line of the inspector's live list."""

    session_id: str
    turn_id: str
    state: str
    step: int
    attempt: int
    trigger: str
    at_ms: int


class TimelineItem(msgspec.Struct, frozen=True, kw_only=True):
    """A state change (`kind` = "transition") or a non-chunk frame (`kind` = its tag)."""

    at_ms: int
    id: str
    kind: str
    step: int | None
    attempt: int | None
    detail: dict[str, Any]


class Timeline(msgspec.Struct, frozen=True, kw_only=True):
    """Everything known of one turn: its snapshot, its history and the chunks per attempt."""

    turn: Turn
    items: list[TimelineItem]
    chunks: dict[str, int]  # "step.attempt" -> text and reasoning chunk frames
    complete: bool  # False when the turn's first transitions were beyond SCAN_LIMIT or trimmed


def stream_ms(entry_id: str) -> int:
    return int(entry_id.partition("-")[0])


async def find_session(
    redis: Redis, turn_id: str, partitions: int, prefix: str = DEFAULT_PREFIX
) -> str | None:
    """The session of a turn known only by its id: its snapshot is in one of the partitions.
    Raises `TurnArchived` if all that is left of it is a tombstone."""
    keys = [Keys(p, prefix).turn(turn_id) for p in range(partitions)]
    async with redis.pipeline(transaction=False) as pipe:
        for key in keys:  # one GET per key: each partition is its own Cluster slot
            pipe.get(key)
        found: list[bytes | None] = await execute(pipe)
    for base in found:
        if base is not None and base != TOMBSTONE:
            return _session_only.decode(base).session_id
    if TOMBSTONE in found:
        raise TurnArchived(turn_id)
    return None


async def load_turn(
    redis: Redis, session_id: str, turn_id: str, partitions: int, prefix: str = DEFAULT_PREFIX
) -> Turn | None:
    """The turn's snapshot with its open attempt's text, or None if there is none. Raises
    `TurnArchived` for a tombstone in the session's partition: it names no session, so the
    caller decides whether to say so (an operator) or not (a session, whose turn it may not be)."""
    keys = keys_for_session(session_id, partitions, prefix)
    base, tail = await mget(redis, [keys.turn(turn_id), keys.tail(turn_id)])
    if base == TOMBSTONE:
        raise TurnArchived(turn_id)
    if base is None:
        return None
    turn = TailLedger().load(base, tail)
    return turn if turn.session_id == session_id else None


async def timeline(
    redis: Redis, session_id: str, turn_id: str, partitions: int, prefix: str = DEFAULT_PREFIX
) -> Timeline | None:
    """The turn's timeline, or None if the session has no such turn (`TurnArchived`: see
    `load_turn`)."""
    turn = await load_turn(redis, session_id, turn_id, partitions, prefix)
    if turn is None:
        return None
    keys = keys_for_session(session_id, partitions, prefix)
    changes, complete = await _transitions_of(redis, keys.transitions, turn_id)
    # The turn's frames were committed with its transitions, so none is older than its first.
    first = f"{changes[0].at_ms}-0" if complete and changes else "-"
    frames = [frame_of(e) for e in await xrange(redis, keys.session(session_id), first)]
    mine = [f for f in frames if f.turn_id == turn_id]
    items = sorted(
        [*changes, *(_frame_item(f) for f in mine if not isinstance(f, CHUNKS))],
        key=_causal,
    )
    return Timeline(turn=turn, items=items, chunks=_chunk_counts(mine), complete=complete)


async def _transitions_of(redis: Redis, key: str, turn_id: str) -> tuple[list[TimelineItem], bool]:
    """The turn's transitions, oldest first, reading the stream back until its first one."""
    found: list[TimelineItem] = []
    end, scanned = "+", 0
    while scanned < SCAN_LIMIT:
        page = cast("list[StreamEntry]", await redis.xrevrange(key, end, "-", SCAN_PAGE))
        for entry_id, fields in page:
            change = _transition.decode(fields[FIELD])
            if change.turn_id == turn_id:
                found.append(_transition_item(text(entry_id), change))
                if change.source == "pending":
                    return found[::-1], True
        if len(page) < SCAN_PAGE:
            return found[::-1], False
        scanned += len(page)
        end = f"({text(page[-1][0])}"
    return found[::-1], False


def _transition_item(entry_id: str, change: Transition) -> TimelineItem:
    detail = {"source": change.source, "dest": change.dest, "trigger": change.trigger}
    return TimelineItem(
        at_ms=stream_ms(entry_id),
        id=entry_id,
        kind="transition",
        step=change.step,
        attempt=change.attempt,
        detail=detail,
    )


def _frame_item(frame: SessionUpdate) -> TimelineItem:
    cursor = frame.cursor or START
    detail: dict[str, Any] = msgspec.json.decode(encode_json(frame))
    for identity in ("sessionUpdate", "session_id", "turn_id", "cursor", "step", "attempt"):
        detail.pop(identity, None)
    return TimelineItem(
        at_ms=stream_ms(cursor),
        id=cursor,
        kind=str(type(frame).__struct_config__.tag),
        step=getattr(frame, "step", None),
        attempt=getattr(frame, "attempt", None),
        detail=detail,
    )


def _causal(item: TimelineItem) -> tuple[float, float, int, bool]:
    """A turn moves through its steps and attempts in order, so they come first; within one,
    time, then state changes before frames of the same millisecond (both streams are written in
    one commit, which shares no sequence across them). A `retrying` frame closes the attempt
    before the one it announces; what names no attempt (a commit, the end) comes after the
    attempts of its step, or of the turn."""
    step = math.inf if item.step is None else item.step
    attempt = math.inf if item.attempt is None else item.attempt
    if item.kind == "retrying":
        attempt -= 1
    return step, attempt, item.at_ms, item.kind != "transition"


def _chunk_counts(frames: Iterable[SessionUpdate]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for frame in frames:
        if isinstance(frame, CHUNKS):
            key = f"{frame.step}.{frame.attempt}"
            counts[key] = counts.get(key, 0) + 1
    return counts


async def recent_turns(
    redis: Redis, partitions: int, prefix: str = DEFAULT_PREFIX, limit: int = 50
) -> list[TurnSummary]:
    """The `limit` turns that changed state last, newest first, each with its latest state."""
    async with redis.pipeline(transaction=False) as pipe:
        for p in range(partitions):
            pipe.xrevrange(Keys(p, prefix).transitions, "+", "-", RECENT_PER_PARTITION)
        pages: list[list[StreamEntry]] = await execute(pipe)
    latest: dict[str, TurnSummary] = {}
    for page in pages:
        for entry_id, fields in page:  # newest first: the first seen of a turn is its latest
            change = _transition.decode(fields[FIELD])
            if change.turn_id not in latest:
                latest[change.turn_id] = _summary(text(entry_id), change)
    newest = sorted(latest.values(), key=lambda s: s.at_ms, reverse=True)
    return newest[:limit]


def _summary(entry_id: str, change: Transition) -> TurnSummary:
    return TurnSummary(
        session_id=change.session_id,
        turn_id=change.turn_id,
        state=change.dest,
        step=change.step,
        attempt=change.attempt,
        trigger=change.trigger,
        at_ms=stream_ms(entry_id),
    )
