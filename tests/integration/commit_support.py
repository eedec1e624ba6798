"""What the commit tests share: the session and frames they write, inbound entries left pending
in the group, the pending entries list, a stream's entries, and a lease held for a worker."""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis

from terminus.events.inbound import Usage
from terminus.events.outbound import AgentMessageChunk, SessionUpdate, TurnFinished
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.runtime.leases import Leases, lease_value

SESSION = "s-1"
MAXLEN = 10_000
Entry = tuple[bytes, dict[bytes, bytes]]
Packed = str | int | list[Any]

FRAMES: list[SessionUpdate] = [
    AgentMessageChunk(
        session_id=SESSION, turn_id="t-1", step=1, attempt=1, part_id="p-1", delta="Hel"
    ),
    TurnFinished(session_id=SESSION, turn_id="t-1", stopReason="end_turn", usage=Usage()),
]


async def pending_entries(redis: Redis, keys: Keys, count: int) -> list[bytes]:
    """`count` inbound entries read through the group but not acked: they sit in the PEL."""
    await redis.xgroup_create(keys.inbound, GROUP, id="0", mkstream=True)
    for n in range(count):
        await redis.xadd(keys.inbound, {FIELD: f'{{"n": {n}}}'})
    reply = await redis.xreadgroup(GROUP, "worker-a", {keys.inbound: ">"}, count=count)
    [(_, entries)] = cast("list[tuple[bytes, list[Entry]]]", reply)
    return [entry_id for entry_id, _ in entries]


async def pel(redis: Redis, keys: Keys) -> list[bytes]:
    rows = await redis.xpending_range(keys.inbound, GROUP, min="-", max="+", count=10_000)
    return [cast(bytes, row["message_id"]) for row in rows]


async def entries(redis: Redis, key: str) -> list[Entry]:
    return cast("list[Entry]", await redis.xrange(key))


async def held_lease(redis: Redis, keys: Keys, worker: str, ttl_ms: int = 10_000) -> str:
    epoch = await Leases(redis, keys.prefix).acquire(keys.partition, worker, ttl_ms)
    assert epoch is not None
    return lease_value(worker, epoch)
