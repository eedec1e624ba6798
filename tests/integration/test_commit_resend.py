"""A commit sent twice is applied once: the second answers "applied already" and writes nothing.

Issue 15, defect 2: when one node of a pipelined round fails, redis-py's cluster client re-sends
every command still without a reply, commits that were applied included, and a commit of the same
epoch passed the lease check and wrote its frames, transitions and counters a second time
(test_failover's 691 frames for 505). commit.lua now answers -1 when none of the batch's entries is
still pending for the consumer, and the worker starts that partition over.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from commit_support import held_lease
from redis.asyncio import Redis

from terminus.service.fold.commit import Batch, CommitAlreadyApplied, commit, encode
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.scripts import script
from terminus.service.runtime.wire import Wire
from terminus.service.settings import Settings

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

CONSUMER = "worker-a"


async def read_batch(redis: Redis, keys: Keys, lease: str) -> Batch:
    """Three entries read by CONSUMER, and a batch that acks them and writes one dead letter."""
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    for n in range(3):
        await redis.xadd(keys.inbound, {b"e": b"%d" % n})
    reply = cast("list[Any]", await redis.xreadgroup(GROUP, CONSUMER, {keys.inbound: ">"}))
    ids = [entry_id.decode() for entry_id, _ in reply[0][1]]
    batch = Batch()
    batch.ack(*ids)
    batch.add_dead(keys, b"raw", "reason", ids[0], keys.inbound)
    return batch


async def test_the_script_refuses_a_commit_it_already_applied(redis: Redis, prefix: str) -> None:
    keys = Keys(0, prefix)
    lease = await held_lease(redis, keys, CONSUMER)
    batch = await read_batch(redis, keys, lease)
    names, args = encode(batch, keys, lease, CONSUMER)
    commit = script(redis, "commit")
    assert isinstance(await commit(keys=names, args=args), list)
    assert await commit(keys=names, args=args) == -1
    assert await redis.xlen(keys.dead) == 1
    assert (await redis.xpending(keys.inbound, GROUP))["pending"] == 0


async def test_commit_raises_on_a_resent_commit(redis: Redis, prefix: str) -> None:
    keys = Keys(1, prefix)
    lease = await held_lease(redis, keys, CONSUMER)
    batch = await read_batch(redis, keys, lease)
    assert await commit(redis, keys, lease, batch, CONSUMER) == []
    with pytest.raises(CommitAlreadyApplied):
        await commit(redis, keys, lease, batch, CONSUMER)
    assert await redis.xlen(keys.dead) == 1


async def test_a_pipelined_commit_resent_through_the_wire_is_refused(
    redis: Redis, prefix: str, on_cluster: bool
) -> None:
    keys = Keys(2, prefix)
    lease = await held_lease(redis, keys, CONSUMER)
    batch = await read_batch(redis, keys, lease)
    names, args = encode(batch, keys, lease, CONSUMER)
    wire = Wire(redis, Settings(prefix=prefix, partitions=4, redis_cluster=on_cluster))
    try:
        [first] = (await wire.send([("commit", names, args)])).replies
        [again] = (await wire.send([("commit", names, args)])).replies
    finally:
        await wire.close()
    assert isinstance(first, list)
    assert again == -1
    assert await redis.xlen(keys.dead) == 1
