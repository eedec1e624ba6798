"""The TLS + ACL pass's own checks (TERMINUS_TEST_REDIS_TLS=1, tests/secure_redis.py): the server
lets nobody in without TLS, the CA, a client certificate and a password; the service's user is
refused what terminus never sends; the worker's FastStream app connects as that user, named.

Every other integration test runs in that pass as the service's user too; these say that the
fence is there, so that the others passing means something. Elsewhere they are skipped.
"""

from __future__ import annotations

import asyncio
import gc
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec
import pytest
from faststream import TestApp
from redis import Redis as BlockingRedis
from redis.asyncio import Redis
from redis.backoff import NoBackoff
from redis.exceptions import NoPermissionError, RedisError
from redis.retry import Retry
from redis.typing import StreamEntry
from secure_redis import SERVICE_USER, SecureRedis, producer_rules, reader_rules

from terminus.events.codec import encode_json
from terminus.events.inbound import TurnStarted
from terminus.events.outbound import AgentMessageChunk
from terminus.service.keys import FIELD, Keys, control_channel, keys_for_session
from terminus.service.redaction import SecretUrl
from terminus.service.redis.replies import text
from terminus.service.runtime.app import create_app
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.subscriber import RedisSource
from terminus.service.settings import Settings
from terminus.service.shape import record
from tests.support.backends import as_user

PARTITIONS: Final = 4

# What the service's user must be refused: each is either a server-wide power or a way around
# the key and channel fences. SHUTDOWN is left out: were it allowed, the test would end the run.
REFUSED: Final = {
    "FLUSHDB": ("FLUSHDB",),
    "KEYS": ("KEYS", "*"),
    "CONFIG GET": ("CONFIG", "GET", "dir"),
    "INFO": ("INFO", "server"),
    "EVAL of any script": ("EVAL", "return 1", "0"),
    "SCRIPT FLUSH": ("SCRIPT", "FLUSH"),
    "CLIENT KILL": ("CLIENT", "KILL", "USER", "admin"),
    "SELECT of another database": ("SELECT", "1"),
    "ACL": ("ACL", "LIST"),
    "CLIENT LIST": ("CLIENT", "LIST"),
    "a key outside the run's root": ("GET", "elsewhere:key"),
    "a channel other than the control channel": ("PUBLISH", "t-x:other", "x"),
}


@pytest.fixture
def server(secure_redis: SecureRedis | None) -> Iterator[SecureRedis]:
    """The TLS server; what these tests were refused on purpose is cleared afterwards, so that
    the pass's check for refusals (tests/conftest.py) sees only unexpected ones."""
    if secure_redis is None:
        pytest.skip("only in the TLS + ACL pass (TERMINUS_TEST_REDIS_TLS=1)")
    yield secure_redis
    secure_redis.denials()


def without(url: str, *names: str) -> str:
    """`url` with the query parameters `names` removed."""
    parts = urlsplit(url)
    kept = [(k, v) for k, v in parse_qsl(parts.query) if k not in names]
    return urlunsplit(parts._replace(query=urlencode(kept)))


def attempts(server: SecureRedis) -> dict[str, str]:
    """URLs that must not get in, each missing one of the things a client must bring."""
    plain = f"redis://{SERVICE_USER}:{server.passwords[SERVICE_USER]}@127.0.0.1:{server.port}/0"
    anonymous = server.url.replace(f"{SERVICE_USER}:{server.passwords[SERVICE_USER]}@", "")
    return {
        "plain TCP": plain,
        "no client certificate": without(server.url, "ssl_certfile", "ssl_keyfile"),
        "not trusting the test CA": without(server.url, "ssl_ca_certs"),
        "the default user": anonymous,
        "a wrong password": as_user(server.url, SERVICE_USER, "wrong"),
    }


ATTEMPTS: Final = (
    "plain TCP",
    "no client certificate",
    "not trusting the test CA",
    "the default user",
    "a wrong password",
)


@pytest.mark.parametrize("what", ATTEMPTS)
def test_nobody_gets_in_without_tls_the_ca_a_certificate_and_a_password(
    server: SecureRedis, what: str
) -> None:
    """A blocking client: a refused asyncio TLS connection closes within the event loop, which
    a test's loop may not outlive."""
    url = attempts(server)[what]
    once = Retry(NoBackoff(), 0)
    with (
        BlockingRedis.from_url(
            url, socket_connect_timeout=2, socket_timeout=2, retry=once
        ) as client,
        pytest.raises(RedisError),
    ):
        client.set("t-intruder:key", b"x")


@pytest.mark.parametrize("command", REFUSED.values(), ids=REFUSED.keys())
async def test_the_service_user_is_refused_what_terminus_never_sends(
    server: SecureRedis, redis: Redis, command: tuple[str, ...]
) -> None:
    with pytest.raises(NoPermissionError):
        await cast(Any, redis).execute_command(*command)
    [refusal] = server.denials()
    assert refusal.startswith(("command", "key", "channel")), refusal


@pytest.fixture
def gc_kept() -> Iterator[None]:
    """The worker app tunes the collector of its process (terminus.service.runtime.app.tune_gc);
    this process runs other tests after it: put the collector back as it was."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("gc_kept")
async def test_the_worker_app_runs_over_tls_as_the_service_user_and_hears_nudges(
    server: SecureRedis, redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    """The FastStream app as `terminus worker` runs it (service/runtime/app.py): its broker
    connects with REDIS_URL alone, names its connections, takes the partitions, and subscribes to
    the control channel, all as the service's user, over TLS with the client certificate."""
    settings = Settings(redis_url=SecretUrl(server.url), prefix=prefix, partitions=2)
    async with TestApp(create_app(settings)):
        await until_leased(redis, prefix, partitions=2)
        channel = control_channel(prefix)
        clients: list[dict[str, Any]] = await admin_redis.client_list()
        named = [c for c in clients if c.get("name") == "terminus-worker"]
        assert named, "no connection named by the worker's broker"
        assert {c["user"] for c in named} == {SERVICE_USER}
        assert any(int(c.get("sub", 0)) == 1 for c in named), "not subscribed to the channel"
        assert await redis.publish(channel, "another-worker") == 1


async def until_leased(redis: Redis, prefix: str, partitions: int) -> None:
    """Wait until a worker holds every partition's lease."""
    for _ in range(500):
        held = [await redis.get(Keys(p, prefix).lease) for p in range(partitions)]
        if all(held):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the worker took no partition within 10 s")


@pytest.fixture
async def user_of(
    server: SecureRedis, admin_redis: Redis, prefix: str
) -> AsyncIterator[Callable[[str, list[str]], Awaitable[Redis]]]:
    """Makes ACL users with given rules (deleted afterwards) and returns a client of each, over
    the same TLS as the service's user."""
    made: list[tuple[str, Redis]] = []

    async def make(role: str, rules: list[str]) -> Redis:
        name, password = f"{role}-{prefix}", secrets.token_urlsafe(16)
        await cast(Any, admin_redis).execute_command(
            "ACL", "SETUSER", name, "reset", "on", f">{password}", *rules
        )
        client = Redis.from_url(as_user(server.url, name, password))
        made.append((name, client))
        return client

    yield make
    for name, client in made:
        await client.aclose()
        await admin_redis.acl_deluser(name)


async def test_a_producer_s_user_appends_to_the_inbound_logs_and_does_nothing_else(
    user_of: Callable[[str, list[str]], Awaitable[Redis]], redis: Redis, prefix: str
) -> None:
    producer = await user_of("producer", producer_rules(prefix, PARTITIONS))
    await record(redis, prefix, PARTITIONS, "pool")  # the pool started first: the user reads it
    started = TurnStarted(session_id="s-1", turn_id="t-1", seq=0)
    [entry] = await Producer(producer, partitions=PARTITIONS, prefix=prefix).publish([started])
    keys = keys_for_session("s-1", PARTITIONS, prefix)
    assert [i for i, _ in cast("list[StreamEntry]", await redis.xrange(keys.inbound))] == [entry]
    with pytest.raises(NoPermissionError):  # another stream of its partition
        await producer.xadd(keys.commands, {FIELD: b"{}"})
    with pytest.raises(NoPermissionError):  # reading
        await producer.xrange(keys.inbound)


async def test_a_reader_s_user_reads_session_streams_and_does_nothing_else(
    user_of: Callable[[str, list[str]], Awaitable[Redis]], redis: Redis, prefix: str
) -> None:
    reader = await user_of("reader", reader_rules(prefix))
    await record(redis, prefix, PARTITIONS, "pool")
    keys = keys_for_session("s-1", PARTITIONS, prefix)
    frame = AgentMessageChunk(
        session_id="s-1", turn_id="t-1", step=1, attempt=1, part_id="p0", delta="hi"
    )
    cursor = text(await redis.xadd(keys.session("s-1"), {FIELD: encode_json(frame)}))
    source = RedisSource(reader, PARTITIONS, prefix, block_ms=100)
    updates = source.read("s-1", None)
    try:
        first = await anext(updates)
    finally:
        await updates.aclose()
    assert first.cursor == cursor
    assert first.frame == msgspec.structs.replace(frame, cursor=cursor)
    with pytest.raises(NoPermissionError):  # writing its own stream
        await reader.xadd(keys.session("s-1"), {FIELD: b"{}"})
    with pytest.raises(NoPermissionError):  # another stream of the partition
        await reader.xread({keys.inbound: "0"})
