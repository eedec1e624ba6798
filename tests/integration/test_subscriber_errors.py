"""What a subscription does on errors (DESIGN section 4): bad tokens and Redis credential or ACL
refusals raise at once without retrying, a 429 is waited out for its Retry-After, and a source
down for longer than the backoff allows raises with the cursor reached."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from serving import serving
from subscriber_support import (
    DEADLINE_S,
    PARTITIONS,
    SECRET,
    Served,
    collect,
    frames,
    publish_tool_turn,
    serve,
    stored,
    token,
)

from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.redis.embedded import free_port
from terminus.service.sdk.gateway_source import retry_after
from terminus.service.sdk.subscriber import (
    Backoff,
    GatewaySource,
    RedisSource,
    SourceUnavailable,
    SubscriptionDenied,
    subscribe,
)
from tests.support.backends import as_user
from tests.support.polling import until


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    """A worker and the gateway on the test's prefix."""
    async with serve(redis, prefix) as running:
        yield running


async def test_bad_tokens_raise_without_retrying(served: Served) -> None:
    await publish_tool_turn(served.producer, "s-5", "t-5", pause=0)
    forged = GatewaySource(served.base, "v1.s-czU.99999999999.forged")
    foreign = GatewaySource(served.base, token("s-other"))
    started = time.monotonic()
    with pytest.raises(SubscriptionDenied) as unauthorized:
        await collect(subscribe("s-5", source=forged))
    with pytest.raises(SubscriptionDenied) as forbidden:
        await collect(subscribe("s-5", source=foreign))
    assert (unauthorized.value.status, forbidden.value.status) == (401, 403)
    assert forbidden.value.reason == "token is not for this session"
    assert time.monotonic() - started < 2


async def test_redis_credentials_and_acl_refusals_raise(
    served: Served, redis_url: str, admin_redis: Redis
) -> None:
    user = f"sub-{served.settings.prefix}"
    await admin_redis.acl_setuser(
        user, enabled=True, passwords=["+right-password"], commands=["+ping"], keys=[]
    )
    clients = [
        Redis.from_url(as_user(redis_url, user, "wrong-password")),
        Redis.from_url(as_user(redis_url, user, "right-password")),
    ]
    try:
        for client in clients:
            source = RedisSource(client, PARTITIONS, served.settings.prefix)
            with pytest.raises(SubscriptionDenied):
                await collect(subscribe("s-6", source=source))
    finally:
        for client in clients:
            await client.aclose()
        await admin_redis.acl_deluser(user)


async def test_a_429_is_waited_out_for_its_retry_after(served: Served) -> None:
    await publish_tool_turn(served.producer, "s-7", "t-7", pause=0)
    await until(lambda: _finished(served, "s-7"), "the turn's end")
    answers: list[tuple[float, int, str | None]] = []

    async def record(response: httpx.Response) -> None:
        answers.append(
            (time.monotonic(), response.status_code, response.headers.get("retry-after"))
        )

    limits = Limits(stream_opens=1, stream_window_s=2.0)
    async with (
        serving(create_gateway(served.redis, served.settings, SECRET, limits)) as base,
        httpx.AsyncClient(event_hooks={"response": [record]}, timeout=DEADLINE_S) as client,
    ):
        source = GatewaySource(base, token("s-7"), client=client)
        first = await collect(subscribe("s-7", source=source, until_turn="t-7"), limit=5)
        rest = await collect(subscribe("s-7", first[-1].cursor, source=source, until_turn="t-7"))
    assert frames(first + rest) == await stored(served, "s-7")
    statuses = [status for _, status, _ in answers]
    assert statuses == [200, 429, 200]
    waited = answers[2][0] - answers[1][0]
    assert waited >= int(answers[1][2] or 0) - 0.05


async def test_a_source_down_for_longer_than_the_backoff_allows_raises() -> None:
    dead = Redis(host="127.0.0.1", port=free_port(), retry=Retry(NoBackoff(), 0))
    backoff = Backoff(initial_s=0.01, max_s=0.05, give_up_after_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(SourceUnavailable) as raised:
            await collect(subscribe("s-8", "5-0", source=RedisSource(dead), backoff=backoff))
    finally:
        await dead.aclose()
    assert raised.value.cursor == "5-0"
    assert 0.5 <= time.monotonic() - started < 3


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after("3", now) == 3.0
    assert retry_after(email.utils.formatdate(now + 7, usegmt=True), now) == 7.0
    assert retry_after(email.utils.formatdate(now - 7, usegmt=True), now) == 0.0
    assert retry_after("soon", now) is None
    assert retry_after(None, now) is None


async def _finished(served: Served, session: str) -> bool:
    kept = await stored(served, session)
    return bool(kept) and type(kept[-1]).__struct_config__.tag == "turn_finished"
