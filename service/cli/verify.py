"""Compare the projections of two key prefixes, partition by partition (used by replay --verify).

Each difference is one line naming the partition, the record and the first differing value.

The partition's metrics hash is compared too: its counters come from the fold's outputs alone
(service/metrics/counters.py), so the same log counts the same. The one count that depends on
history rather than the log, dead letters for their delivery count, replay takes as recorded
(service/cli/replay.py), so it matches as well. Entries deleted while pending are not counted live
and cannot be seen by a replay. A pool that ran a version without metrics counts only what it
committed since, and verify reports that as a difference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import encode_msgpack
from terminus.service.fold.commit import COMMANDS_MAXLEN, TRANSITIONS_MAXLEN
from terminus.service.fold.snapshots import SnapshotError, TailLedger
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.replies import xrange

Value = bytes | tuple[bytes, ...]


async def compare(
    redis: Redis, partitions: int, live: str, rebuilt: str, session_maxlen: int
) -> list[str]:
    """Every difference between the projections under `live` and under `rebuilt`."""
    differences: list[str] = []
    for partition in range(partitions):
        live_keys, new_keys = Keys(partition, live), Keys(partition, rebuilt)
        differences += await compare_partition(redis, live_keys, new_keys, session_maxlen)
    return differences


async def compare_partition(redis: Redis, live: Keys, new: Keys, session_maxlen: int) -> list[str]:
    out: list[str] = []
    p = live.partition
    for name, pick, capped in (
        ("commands", _field, COMMANDS_MAXLEN),
        ("transitions", _field, TRANSITIONS_MAXLEN),
        ("dead", _dead_letter, 0),
    ):
        key_live, key_new = getattr(live, name), getattr(new, name)
        out += await _streams(redis, f"p{p} {name}", key_live, key_new, pick, capped)
    out += await _zsets(redis, f"p{p} open turns", live.open_turns, new.open_turns)
    out += await _zsets(redis, f"p{p} archived turns", live.archived, new.archived)
    out += await _zsets(redis, f"p{p} resting sessions", live.resting, new.resting)
    out += await _hashes(redis, f"p{p} metrics", live.metrics, new.metrics)
    out += await _per_id(redis, p, live, new, session_maxlen)
    return out


async def _per_id(redis: Redis, p: int, live: Keys, new: Keys, session_maxlen: int) -> list[str]:
    out: list[str] = []
    for kind in ("session", "turn", "tail", "messages", "message_order", "partials"):
        make_live, make_new = getattr(live, kind), getattr(new, kind)
        ids_live = await _ids(redis, make_live)
        ids_new = await _ids(redis, make_new)
        if ids_live != ids_new:
            out.append(
                f"p{p} {kind}: only live has {sorted(ids_live - ids_new)[:3]}, "
                f"only rebuilt has {sorted(ids_new - ids_live)[:3]}"
            )
        for some_id in sorted(ids_live & ids_new):
            what = f"p{p} {kind} {some_id}"
            keys = (make_live(some_id), make_new(some_id))
            out += await _one(redis, kind, what, *keys, session_maxlen)
    return out


async def _one(
    redis: Redis, kind: str, what: str, key_live: str, key_new: str, session_maxlen: int
) -> list[str]:
    if kind == "session":
        return await _streams(redis, what, key_live, key_new, _field, session_maxlen)
    if kind == "turn":
        a, b = await _whole_turn(redis, key_live), await _whole_turn(redis, key_new)
        return [] if a == b else [f"{what}: snapshot differs"]
    if kind == "tail":  # compared within the whole turn: its chunks' order spans batches
        return []
    if kind == "message_order":
        return await _zsets(redis, what, key_live, key_new)
    return await _hashes(redis, what, key_live, key_new)


async def _hashes(redis: Redis, what: str, key_live: str, key_new: str) -> list[str]:
    a_map = cast("dict[bytes, bytes]", await redis.hgetall(key_live))
    b_map = cast("dict[bytes, bytes]", await redis.hgetall(key_new))
    if a_map == b_map:
        return []
    field = sorted(set(a_map) ^ set(b_map) or {f for f in a_map if a_map[f] != b_map.get(f)})[0]
    live_value, new_value = _short(a_map.get(field)), _short(b_map.get(field))
    return [f"{what} {field.decode()}: live {live_value} rebuilt {new_value}"]


async def _whole_turn(redis: Redis, key: str) -> tuple[bytes | None, ...]:
    """The snapshot at `key` with its tail's text put back (service/fold/snapshots.py); as stored
    if it cannot be read (then it differs from any readable one)."""
    tail_key = key.replace(":turn:", ":tail:", 1)
    base, tail = cast("list[bytes | None]", await redis.mget([key, tail_key]))
    if base is None:
        return (None,)
    try:
        return (encode_msgpack(TailLedger().load(base, tail)),)
    except (msgspec.MsgspecError, SnapshotError):
        return (b"unreadable", base, tail)


async def _ids(redis: Redis, make: Callable[[str], str]) -> set[str]:
    pattern = make("*")
    head = len(pattern) - 1
    return {key.decode()[head:] async for key in redis.scan_iter(match=pattern, count=1000)}


async def _streams(
    redis: Redis,
    what: str,
    key_live: str,
    key_new: str,
    pick: Callable[[dict[bytes, bytes]], Value],
    cap: int,
) -> list[str]:
    """`cap` > 0: the streams were written with `MAXLEN ~ cap`."""
    a = [pick(f) for _, f in await xrange(redis, key_live)]
    b = [pick(f) for _, f in await xrange(redis, key_new)]
    if cap and max(len(a), len(b)) > cap:
        # `MAXLEN ~` trims at node boundaries, which depend on the ids: compare what both keep.
        keep = min(len(a), len(b))
        a, b = a[len(a) - keep :], b[len(b) - keep :]
    return _first_difference(what, a, b)


def _first_difference(what: str, a: Sequence[Value], b: Sequence[Value]) -> list[str]:
    for n, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return [f"{what} entry {n}: {_where_differ(x, y)}"]
    if len(a) != len(b):
        return [f"{what}: live has {len(a)} entries, rebuilt {len(b)}"]
    return []


async def _zsets(redis: Redis, what: str, key_live: str, key_new: str) -> list[str]:
    a = await redis.zrange(key_live, 0, -1, withscores=True)
    b = await redis.zrange(key_new, 0, -1, withscores=True)
    return [] if a == b else [f"{what}: live {_short(a)} rebuilt {_short(b)}"]


def _field(fields: dict[bytes, bytes]) -> Value:
    return fields.get(FIELD, b"")


def _dead_letter(fields: dict[bytes, bytes]) -> Value:
    return tuple(fields.get(k, b"") for k in (b"raw", b"reason", b"source_stream", b"source_id"))


def _where_differ(x: Value, y: Value) -> str:
    if isinstance(x, bytes) and isinstance(y, bytes):
        at = next((i for i, (c, d) in enumerate(zip(x, y, strict=False)) if c != d), len(x))
        start = max(0, at - 40)
        return f"at byte {at}: live {x[start : at + 60]!r} rebuilt {y[start : at + 60]!r}"
    return f"live {_short(x)} rebuilt {_short(y)}"


def _short(value: object, width: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
