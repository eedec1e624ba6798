"""Partition leases against a real Redis: ownership, renewal, release and epoch fencing."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from terminus.service.keys import Keys
from terminus.service.runtime.leases import Leases, lease_value

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

TTL = 10_000
SHORT_TTL = 30


async def expire() -> None:
    """Wait past SHORT_TTL; the lease key is gone afterwards."""
    await asyncio.sleep(SHORT_TTL * 3 / 1000)


async def test_a_free_lease_is_taken_with_a_new_epoch(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    leases = Leases(redis, prefix)
    assert await leases.acquire(0, "worker-a", TTL) == 1
    assert await redis.get(Keys(0, prefix).lease) == b"worker-a:1"
    assert 0 < await admin_redis.pttl(Keys(0, prefix).lease) <= TTL


async def test_a_held_lease_is_refused_to_others_and_renewed_for_its_owner(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    leases = Leases(redis, prefix)
    assert await leases.acquire(3, "host:1", SHORT_TTL) == 1
    assert await leases.acquire(3, "host:2", TTL) is None
    assert await leases.acquire(3, "host:1", TTL) == 1
    assert await admin_redis.pttl(Keys(3, prefix).lease) > SHORT_TTL
    assert await redis.get(Keys(3, prefix).epoch) == b"1"


async def test_epochs_increase_each_time_the_lease_changes_hands(redis: Redis, prefix: str) -> None:
    leases = Leases(redis, prefix)
    assert await leases.acquire(1, "worker-a", SHORT_TTL) == 1
    await expire()
    assert await leases.acquire(1, "worker-b", SHORT_TTL) == 2
    await expire()
    assert await leases.acquire(1, "worker-a", TTL) == 3
    assert await leases.release(1, "worker-a", 3)
    assert await leases.acquire(1, "worker-b", TTL) == 4


async def test_partitions_have_their_own_leases(redis: Redis, prefix: str) -> None:
    leases = Leases(redis, prefix)
    assert await leases.acquire(0, "worker-a", TTL) == 1
    assert await leases.acquire(1, "worker-b", TTL) == 1


async def test_the_owner_renews_and_releases(redis: Redis, admin_redis: Redis, prefix: str) -> None:
    leases = Leases(redis, prefix)
    epoch = await leases.acquire(2, "worker-a", SHORT_TTL)
    assert epoch == 1
    assert await leases.renew(2, "worker-a", epoch, TTL)
    assert await admin_redis.pttl(Keys(2, prefix).lease) > SHORT_TTL
    assert await leases.release(2, "worker-a", epoch)
    assert await admin_redis.exists(Keys(2, prefix).lease) == 0
    assert not await leases.renew(2, "worker-a", epoch, TTL)
    assert not await leases.release(2, "worker-a", epoch)


async def test_a_stale_owner_can_neither_renew_nor_release(redis: Redis, prefix: str) -> None:
    leases = Leases(redis, prefix)
    stale = await leases.acquire(0, "worker-a", SHORT_TTL)
    assert stale == 1
    await expire()
    fresh = await leases.acquire(0, "worker-b", TTL)
    assert fresh == 2
    assert not await leases.renew(0, "worker-a", stale, TTL)
    assert not await leases.release(0, "worker-a", stale)
    assert await redis.get(Keys(0, prefix).lease) == lease_value("worker-b", fresh).encode()


async def test_the_same_worker_with_an_old_epoch_is_stale_too(redis: Redis, prefix: str) -> None:
    leases = Leases(redis, prefix)
    assert await leases.acquire(0, "worker-a", SHORT_TTL) == 1
    await expire()
    assert await leases.acquire(0, "worker-a", TTL) == 2
    assert not await leases.renew(0, "worker-a", 1, TTL)
    assert not await leases.release(0, "worker-a", 1)
    assert await leases.renew(0, "worker-a", 2, TTL)
