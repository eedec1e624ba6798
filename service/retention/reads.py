"""What the archiver reads from Redis: where a partition's log may be archived up to, and
just enough of snapshots and frames to tell final turns, open ones and a frame's turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import msgspec
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.fold.releases import TOMBSTONE, id_key
from terminus.service.keys import GROUP, START, Keys
from terminus.service.redis.replies import text, xrange
from terminus.statemachines.states import FINAL_STATES, TurnState


class Head(msgspec.Struct):
    """The part of a snapshot the archiver reads."""

    session_id: str
    state: TurnState


_head = msgspec.msgpack.Decoder(Head)


class _FrameTurn(msgspec.Struct):
    turn_id: str


_frame_turn = msgspec.json.Decoder(_FrameTurn)


def frame_turn(frame: bytes) -> str:
    """The turn id of a session frame as stored."""
    return _frame_turn.decode(frame).turn_id


def read_head(raw: bytes | None) -> Head | None:
    if raw is None or raw == TOMBSTONE:
        return None
    return _head.decode(raw)


async def released(redis: Redis, keys: Keys, turn_id: str) -> bool:
    return await redis.get(keys.turn(turn_id)) in (None, TOMBSTONE)


def is_final(head: Head | None) -> bool:
    return head is not None and head.state in FINAL_STATES


def is_open(head: Head | None) -> bool:
    return head is not None and head.state not in FINAL_STATES


async def server_ms(redis: Redis) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def mget_all(redis: Redis, keys: Sequence[str]) -> list[bytes | None]:
    return cast("list[bytes | None]", await redis.mget(keys)) if keys else []


async def holds_up_to(redis: Redis, keys: Keys, entry_id: str) -> bool:
    """Whether the log still holds an entry at or before `entry_id`."""
    return bool(await xrange(redis, keys.inbound, "-", entry_id, 1))


async def delivered_limit(redis: Redis, keys: Keys) -> str | None:
    """The XRANGE end an archive may reach: delivered to the group, before any pending entry."""
    try:
        groups = cast("list[dict[str, object]]", await redis.xinfo_groups(keys.inbound))
    except ResponseError:  # no such stream: nothing was ever published here
        return None
    group = next((g for g in groups if text(g["name"]) == GROUP), None)
    if group is None or text(group["last-delivered-id"]) == START:
        return None
    summary = await redis.xpending(keys.inbound, GROUP)
    if summary["pending"]:
        return "(" + text(summary["min"])  # exclusive: the oldest pending entry stays
    return text(group["last-delivered-id"])


async def folded_all(redis: Redis, keys: Keys) -> bool:
    """Whether the group has delivered every entry of the log and none is pending."""
    limit = await delivered_limit(redis, keys)
    if limit is None or limit.startswith("("):
        return False
    last = await xrange_last(redis, keys.inbound)
    return last is None or id_key(last) <= id_key(limit)


async def xrange_last(redis: Redis, key: str) -> str | None:
    """The id of the stream's last entry; None if it has none."""
    rows = cast("list[tuple[bytes, object]]", await redis.xrevrange(key, count=1))
    return rows[0][0].decode() if rows else None
