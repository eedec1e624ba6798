"""Partition leases with an epoch, the fencing token every commit checks (DESIGN section 5).

A lease is the key `Keys(p).lease` holding "<worker_id>:<epoch>" with a TTL; `Keys(p).epoch`
counts every time the lease changed hands, so a later owner always holds a higher epoch and a
worker that lost its lease can be told apart from the one that holds it now, even when both
share a worker id across a restart.
"""

from __future__ import annotations

from redis.asyncio import Redis

from terminus.service.keys import DEFAULT_PREFIX, Keys
from terminus.service.redis.scripts import script


def lease_value(worker_id: str, epoch: int) -> str:
    """What the lease key holds while `worker_id` owns the partition at `epoch`."""
    return f"{worker_id}:{epoch}"


class Leases:
    """Acquire, renew and release the partition leases of one key prefix; each step is atomic."""

    def __init__(self, redis: Redis, prefix: str = DEFAULT_PREFIX) -> None:
        self.redis = redis
        self.prefix = prefix

    async def acquire(self, partition: int, worker_id: str, ttl_ms: int) -> int | None:
        """Take a free lease (a new epoch) or renew our own (same epoch); None if someone else's."""
        keys = Keys(partition, self.prefix)
        run = script(self.redis, "lease_acquire")
        epoch = await run(keys=[keys.lease, keys.epoch], args=[worker_id, ttl_ms])
        return None if epoch is None else int(epoch)

    async def renew(self, partition: int, worker_id: str, epoch: int, ttl_ms: int) -> bool:
        """Extend the TTL only if the lease is still `worker_id` at `epoch`."""
        keys = [Keys(partition, self.prefix).lease]
        run = script(self.redis, "lease_renew")
        return bool(await run(keys=keys, args=[lease_value(worker_id, epoch), ttl_ms]))

    async def rotate(self, partition: int, worker_id: str, epoch: int) -> int | None:
        """A new epoch for a lease `worker_id` still holds at `epoch`; None if it lost it."""
        keys = Keys(partition, self.prefix)
        run = script(self.redis, "lease_rotate")
        new = await run(
            keys=[keys.lease, keys.epoch], args=[lease_value(worker_id, epoch), worker_id]
        )
        return None if new is None else int(new)

    async def release(self, partition: int, worker_id: str, epoch: int) -> bool:
        """Delete the lease only if it is still `worker_id` at `epoch`."""
        keys = [Keys(partition, self.prefix).lease]
        run = script(self.redis, "lease_release")
        return bool(await run(keys=keys, args=[lease_value(worker_id, epoch)]))
