"""What a test runs on: one Redis or a Redis Cluster (the `cluster` marker, tests/conftest.py)."""

from __future__ import annotations

from typing import NamedTuple, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from service.connect import connect, is_cluster


class Target(NamedTuple):
    """Where a fault test runs: a Redis URL, and whether it names a node of a cluster."""

    url: str
    cluster: bool

    def client(self) -> Redis:
        return connect(self.url, cluster=self.cluster)


async def mget_any(redis: Redis, keys: list[str]) -> list[bytes | None]:
    """MGET of keys in any slots: one MGET per slot on a cluster (a test's check, not atomic)."""
    if is_cluster(redis):
        return cast("list[bytes | None]", await cast(RedisCluster, redis).mget_nonatomic(keys))
    return cast("list[bytes | None]", await redis.mget(keys))
