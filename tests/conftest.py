"""Fixtures shared by every tier: a real Redis for integration tests, private servers for faults.

`redis_url` is REDIS_URL when set, else a private redis-server started for the test session, so
the gate needs no Redis installed. Tests never stop or restart that server; fault tests start
their own with `private_redis`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from service.embedded import EmbeddedRedis, Fsync
from service.replay import clear_prefix

StartRedis = Callable[..., EmbeddedRedis]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """REDIS_URL if set, else the URL of a private redis-server that lives for the session."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with EmbeddedRedis(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses; the `redis` fixture deletes its keys afterwards."""
    return f"t-{uuid.uuid4().hex}"


@pytest.fixture
async def redis(redis_url: str, prefix: str) -> AsyncIterator[Redis]:
    """An asyncio client; every key under `prefix` is unlinked after the test."""
    client = Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await clear_prefix(client, prefix)
        await client.aclose()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[StartRedis]:
    """Starts fresh redis-servers in `tmp_path` (free ports, AOF) and stops them after the test."""
    servers: list[EmbeddedRedis] = []

    def start(*, appendfsync: Fsync = "everysec", binary: str | None = None) -> EmbeddedRedis:
        data_dir = tmp_path / f"redis-{len(servers)}"
        server = EmbeddedRedis(data_dir, appendfsync=appendfsync, binary=binary)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()
