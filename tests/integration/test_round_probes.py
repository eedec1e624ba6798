"""A round's probes (round.lua, `service.runtime.wire.Probe`): idle owners are read in the round
only where their logs grew, each read fenced by its own lease, one failure in its own place; and
a probe of a log that did not grow costs the round no lease GET, XRANGE or XREADGROUP."""

from __future__ import annotations

from typing import Any

import pytest
from commit_support import held_lease, pel
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bench.common.redis_ops import server_usage
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.replies import text
from terminus.service.redis.scripts import script
from terminus.service.runtime.wire import Call, Probe, bundle, unbundle

WORKER = "worker-a"
COUNT = 10


async def caught_up(redis: Redis, keys: Keys, worker: str = WORKER) -> Probe:
    """A partition whose one entry its owner has read: the owner waits after that entry."""
    await redis.xgroup_create(keys.inbound, GROUP, id="0", mkstream=True)
    last = text(await redis.xadd(keys.inbound, {FIELD: b"read already"}))
    await redis.xreadgroup(GROUP, worker, {keys.inbound: ">"})
    lease = await held_lease(redis, keys, worker)
    return Probe(keys.lease, keys.inbound, lease, worker, last)


async def probe_round(redis: Redis, probes: list[Probe]) -> dict[int, Any]:
    name, keys, args = bundle([], probes, COUNT)
    replies, read = unbundle([await script(redis, name)(keys=keys, args=args)], 0)
    assert replies == []
    return read


async def test_only_the_logs_that_grew_are_read(redis: Redis, prefix: str) -> None:
    keys = [Keys(p, prefix) for p in range(4)]
    probes = [await caught_up(redis, k) for k in keys]
    for p in (1, 3):
        await redis.xadd(keys[p].inbound, {FIELD: f"new in {p}".encode()})
    read = await probe_round(redis, probes)
    assert sorted(read) == [1, 3]
    for p in (1, 3):
        ids, payloads, tail = read[p]
        assert payloads == [f"new in {p}".encode()]
        assert tail == b"", "entries were read: the tail is not told"
        assert (await pel(redis, keys[p]))[1:] == ids, "read for this owner, through the group"
    assert await probe_round(redis, probes) == {
        1: [[], [], read[1][0][0]],
        3: [[], [], read[3][0][0]],
    }, "the same probes again: delivered to the group already, each is told where its log ends"


async def test_a_probe_whose_lease_moved_reads_nothing(redis: Redis, prefix: str) -> None:
    keys = Keys(0, prefix)
    probe = await caught_up(redis, keys)
    await redis.delete(keys.lease)
    await held_lease(redis, keys, "worker-b")
    await redis.xadd(keys.inbound, {FIELD: b"for the new owner"})
    before = await pel(redis, keys)
    assert await probe_round(redis, [probe]) == {0: 0}
    assert await pel(redis, keys) == before, "nothing delivered to the fenced owner"


async def test_a_log_that_is_no_stream_fails_its_probe_alone(redis: Redis, prefix: str) -> None:
    keys = [Keys(p, prefix) for p in range(3)]
    probes = [await caught_up(redis, k) for k in keys]
    await redis.delete(keys[1].inbound)
    await redis.set(keys[1].inbound, "not a stream")
    await redis.xadd(keys[2].inbound, {FIELD: b"new"})
    read = await probe_round(redis, probes)
    assert sorted(read) == [1, 2]
    assert isinstance(read[1], ResponseError)
    assert "WRONGTYPE" in str(read[1])
    assert read[2][1] == [b"new"]


async def test_probes_beyond_one_xread_s_spread_are_read_too(redis: Redis, prefix: str) -> None:
    """round.lua spreads its probes over XREADs of at most 1,000 logs each."""
    keys = [Keys(p, prefix) for p in range(1_003)]
    pipe = redis.pipeline(transaction=False)
    for k in keys:
        pipe.xgroup_create(k.inbound, GROUP, id="0", mkstream=True)
        pipe.set(k.lease, f"{WORKER}:1")
    await pipe.execute()
    probes = [Probe(k.lease, k.inbound, f"{WORKER}:1", WORKER, "0-0") for k in keys]
    for p in (0, 999, 1_000, 1_002):
        await redis.xadd(keys[p].inbound, {FIELD: f"{p}".encode()})
    read = await probe_round(redis, probes)
    assert sorted(read) == [0, 999, 1_000, 1_002]
    assert all(read[p][1] == [f"{p}".encode()] for p in read)


async def test_caught_up_probes_cost_one_xread_and_nothing_per_owner(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    probes = [await caught_up(redis, Keys(p, prefix)) for p in range(16)]
    before = await server_usage(admin_redis)
    assert await probe_round(redis, probes) == {}
    calls = (await server_usage(admin_redis)).minus(before).commands
    ran = {name: n for name, (n, _) in calls.items() if n and name not in ("info", "evalsha")}
    assert ran == {"xread": 1}, "no GET, XRANGE or XREADGROUP for an owner with nothing new"


@pytest.mark.parametrize("grown", [0, 5])
async def test_calls_and_probes_share_a_round(redis: Redis, prefix: str, grown: int) -> None:
    """A busy owner's call answers in its place whether or not a probe read anything."""
    busy = Keys(9, prefix)
    await redis.xgroup_create(busy.inbound, GROUP, id="0", mkstream=True)
    await redis.xadd(busy.inbound, {FIELD: b"busy"})
    lease = await held_lease(redis, busy, WORKER)
    keys = [Keys(p, prefix) for p in range(grown + 1)]
    probes = [await caught_up(redis, k) for k in keys]
    for k in keys[:grown]:
        await redis.xadd(k.inbound, {FIELD: b"grew"})
    call: Call = ("read", [busy.lease, busy.inbound], [lease, GROUP, WORKER, COUNT])
    name, names, args = bundle([call], probes, COUNT)
    [reply], read = unbundle([await script(redis, name)(keys=names, args=args)], 1)
    assert reply[1] == [b"busy"]
    assert sorted(read) == list(range(grown))
