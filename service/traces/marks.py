"""Where a follower of a partition's log resumes after a restart: its mark in Redis.

A mark holds two entry ids: `resume`, the first entry of the oldest turn still open when the mark
was written (none if no turn was open), and `through`, the last entry read by then, up to which
every turn that ended was exported. A follower that starts from a mark folds the log again from
`resume` (or after `through`), which rebuilds every open turn from its own first entry, and
exports only the turns that end after `through`: with one follower, no turn twice and none lost.
The mark is written only after the spans of a pass were exported.
"""

from __future__ import annotations

import msgspec
from redis.asyncio import Redis

from terminus.service.keys import Keys

IdKey = tuple[int, int]


class Mark(msgspec.Struct, frozen=True, kw_only=True):
    resume: str | None
    through: str


_decoder = msgspec.json.Decoder(Mark)


async def load(redis: Redis, keys: Keys) -> Mark | None:
    """The partition's mark, if a follower wrote one."""
    raw = await redis.get(keys.traces_mark)
    return None if raw is None else _decoder.decode(raw)


async def save(redis: Redis, keys: Keys, mark: Mark) -> None:
    await redis.set(keys.traces_mark, msgspec.json.encode(mark))


def id_of(key: IdKey) -> str:
    return f"{key[0]}-{key[1]}"


def floor_of(mark: Mark) -> IdKey:
    """The first entry id a follower starting from `mark` reads."""
    if mark.resume is not None:
        return _key(mark.resume)
    ms, seq = _key(mark.through)
    return ms, seq + 1


def _key(entry_id: str) -> IdKey:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)
