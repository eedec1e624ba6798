"""Which session streams a release lets go: the idle ones (DESIGN section 10, retention).

A session's stream goes once no frontend needs it: the session has no open turn, and its last
frame is older than the retention and of a released turn (or of one the same release archives).
The candidates are the sessions of the segment's turns and the sessions listed in
`{p}:resting`, where the fold puts the session of every turn it releases. A turn is released
once it *started* more than `retain_ms` ago, usually before its last frame is that old, so the
check has to come back later: the set is how any later pass, by whichever worker owns the
partition then, finds the session again. The release names each idle session with its last
frame; the fold deletes the stream only if that frame is still its last, and unlists the
session either way (a turn that wrote to it since lists it again when it is released).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from redis.asyncio import Redis

from terminus.service.fold.releases import TOMBSTONE, id_key
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.connect import execute
from terminus.service.redis.replies import StreamEntry, text
from terminus.service.retention.reads import frame_turn, mget_all, read_head

RESTING_PAGE: Final = 1_000  # resting sessions judged per pass, the longest resting first

Idle = tuple[str, bytes]  # a session and its last frame as the archiver saw it (b"": no stream)


async def idle_sessions(
    redis: Redis, keys: Keys, archived: Mapping[str, str], horizon_ms: int
) -> list[Idle]:
    """The idle sessions among the resting ones and those of `archived` (turn id -> session
    id, the turns the release archives), whose last frame is older than `horizon_ms`."""
    resting = [text(s) for s in await redis.zrange(keys.resting, 0, RESTING_PAGE - 1)]
    candidates = set(resting) | set(archived.values())
    if candidates:  # the open turns' snapshots are read only when there is something to judge
        candidates -= await busy_sessions(redis, keys)
    ordered = sorted(candidates)
    idle: list[Idle] = []
    old: dict[str, bytes] = {}  # session -> its last frame, older than the horizon
    for session, last in zip(ordered, await _lasts(redis, keys, ordered), strict=True):
        if last is None:
            idle.append((session, b""))  # its stream is gone already: the release unlists it
        elif id_key(text(last[0]))[0] < horizon_ms and last[1].get(FIELD) is not None:
            old[session] = last[1][FIELD]
    turns = {session: frame_turn(frame) for session, frame in old.items()}
    gone = await _released(redis, keys, [t for t in turns.values() if t not in archived])
    idle += [(s, old[s]) for s, t in turns.items() if t in archived or t in gone]
    return sorted(idle)


async def busy_sessions(redis: Redis, keys: Keys) -> set[str]:
    """Sessions with an open turn."""
    open_ids = [text(t) for t in await redis.zrange(keys.open_turns, 0, -1)]
    heads = await mget_all(redis, [keys.turn(t) for t in open_ids])
    return {h.session_id for h in map(read_head, heads) if h is not None}


async def _lasts(redis: Redis, keys: Keys, sessions: list[str]) -> list[StreamEntry | None]:
    async with redis.pipeline(transaction=False) as pipe:
        for session in sessions:
            pipe.xrevrange(keys.session(session), count=1)
        found = cast("list[list[StreamEntry]]", await execute(pipe))
    return [rows[0] if rows else None for rows in found]


async def _released(redis: Redis, keys: Keys, turn_ids: list[str]) -> set[str]:
    """Those turns whose snapshot is a tombstone or gone."""
    found = await mget_all(redis, [keys.turn(t) for t in turn_ids])
    return {t for t, raw in zip(turn_ids, found, strict=True) if raw in (None, TOMBSTONE)}
