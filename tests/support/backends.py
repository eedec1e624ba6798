"""What a test runs on: one Redis or a Redis Cluster (the `cluster` marker, tests/conftest.py)."""

from __future__ import annotations

from typing import NamedTuple, cast
from urllib.parse import quote, urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from terminus.service.redis.connect import connect, is_cluster


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


def as_user(url: str, user: str, password: str) -> str:
    """`url` with another user and password, the rest kept (a TLS URL's CA and certificate in
    its query too): redis-py's `from_url` lets a URL's credentials win over `username=`."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def at_port(url: str, port: int) -> str:
    """`url` naming another port on the same host (a proxy in front of the server), the rest
    kept: the scheme, so TLS goes through the proxy, and the credentials."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    host = f"{parts.hostname}:{port}"
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{host}" if userinfo else host))
