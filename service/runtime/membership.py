"""Who is in the worker pool and which partitions each member should own.

Membership is a sorted set of worker ids scored by heartbeat deadlines on the server's clock.
Assignment is rendezvous hashing: partition p goes to the live worker with the highest
blake2b(worker, p). Every worker computes the same answer from the same member list, and when a
worker joins or leaves only the partitions it wins or held move, about P/N of them.
"""

from __future__ import annotations

import hashlib

from redis.asyncio import Redis

from terminus.service.keys import workers_key
from terminus.service.redis.scripts import script


def _weight(worker_id: str, partition: int) -> bytes:
    return hashlib.blake2b(f"{worker_id}\x00{partition}".encode(), digest_size=8).digest()


def owner_of(partition: int, workers: list[str]) -> str:
    """The worker that should own `partition`; `workers` must not be empty."""
    return max(workers, key=lambda w: _weight(w, partition))


def assigned(partitions: int, workers: list[str], worker_id: str) -> set[int]:
    """The partitions `worker_id` should own when `workers` are the live pool."""
    if not workers:
        return set()
    return {p for p in range(partitions) if owner_of(p, workers) == worker_id}


async def heartbeat(redis: Redis, prefix: str, worker_id: str, ttl_ms: int) -> list[str]:
    """Announce `worker_id` for `ttl_ms` (0: leave) and return the live pool, sorted."""
    run = script(redis, "heartbeat")
    _, members = await run(keys=[workers_key(prefix)], args=[worker_id, ttl_ms])
    return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
