"""The gateway for browser pages: CORS for the origins an operator lists (off by default), and
`until_turn`, which ends a session's stream when one turn ends (issue "Adopted in an afternoon
(2/2)", item 2)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Final, NamedTuple

import httpx
import msgspec
import pytest
from redis.asyncio import Redis
from serving import running_worker, serving

from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from tests.support.polling import until

PARTITIONS: Final = 4
SECRET: Final = b"browser-test-secret-0123456789ab"
PAGE: Final = "http://127.0.0.1:5173"


class Served(NamedTuple):
    base: str
    redis: Redis
    settings: Settings
    producer: Producer


async def serve(redis: Redis, prefix: str, origins: list[str]) -> AsyncIterator[Served]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, cors_origins=origins)
    app = create_gateway(redis, settings, SECRET)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings), serving(app) as base:
        yield Served(base, redis, settings, producer)


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    async for s in serve(redis, prefix, [PAGE]):
        yield s


@pytest.fixture
async def closed(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    async for s in serve(redis, prefix, []):
        yield s


def auth(session: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint(SECRET, session, int(time.time()) + 600)}"}


def preflight(origin: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization, last-event-id",
    }


async def test_a_listed_origin_may_read_and_cancel(served: Served) -> None:
    url = f"{served.base}/v1/sessions/s-1/messages"
    async with httpx.AsyncClient() as client:
        allowed = await client.options(url, headers=preflight(PAGE))
        read = await client.get(url, headers={**auth("s-1"), "Origin": PAGE})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == PAGE
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in allowed.headers
    assert read.status_code == 200
    assert read.headers["access-control-allow-origin"] == PAGE


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:5174"])
async def test_an_unlisted_origin_is_refused(served: Served, origin: str) -> None:
    url = f"{served.base}/v1/sessions/s-1/messages"
    async with httpx.AsyncClient() as client:
        refused = await client.options(url, headers=preflight(origin))
        read = await client.get(url, headers={**auth("s-1"), "Origin": origin})
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    assert "access-control-allow-origin" not in read.headers


async def test_cors_is_off_by_default(closed: Served) -> None:
    url = f"{closed.base}/v1/sessions/s-1/messages"
    async with httpx.AsyncClient() as client:
        read = await client.get(url, headers={**auth("s-1"), "Origin": PAGE})
        asked = await client.options(url, headers=preflight(PAGE))
    assert "access-control-allow-origin" not in read.headers
    assert asked.status_code == 405


def turn(session: str, turn_id: str, words: list[str]) -> list[InboundEvent]:
    ids: dict[str, Any] = {"session_id": session, "turn_id": turn_id}
    usage = Usage(output_tokens=len(words))
    events: list[InboundEvent] = [
        TurnStarted(**ids, seq=0),
        AttemptStarted(**ids, seq=1, provider="p", model="m"),
        TextStart(**ids, seq=2, part_id="a"),
    ]
    events += [TextDelta(**ids, seq=3 + n, part_id="a", delta=w) for n, w in enumerate(words)]
    seq = 3 + len(words)
    events += [
        TextEnd(**ids, seq=seq, part_id="a"),
        FinishStep(**ids, seq=seq + 1, finish_reason="stop", raw_finish_reason="e", usage=usage),
    ]
    return events


async def follow(served: Served, session: str, query: str) -> list[tuple[str, str]]:
    """(event, turn_id) of each SSE event until the stream ends."""
    found: list[tuple[str, str]] = []
    url = f"{served.base}/v1/sessions/{session}/updates?{query}"
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("GET", url, headers=auth(session)) as response,
    ):
        assert response.status_code == 200
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data = msgspec.json.decode(line.partition(":")[2].strip())
                found.append((event, data["turn_id"]))
    return found


async def ended(served: Served, session: str, count: int) -> bool:
    key = served.producer.keys(session).session(session)
    return await served.redis.xlen(key) >= count


async def test_until_turn_ends_with_that_turn(served: Served) -> None:
    session = "s-two"
    await served.producer.publish(turn(session, "t-1", ["a", "b"]))
    await until(lambda: ended(served, session, 4), "turn 1 committed")
    follower = asyncio.create_task(follow(served, session, "until_turn=t-2"))
    await asyncio.sleep(0.2)  # the stream is open before turn 2 exists
    await served.producer.publish(turn(session, "t-2", ["c"]))
    found = await asyncio.wait_for(follower, 30)
    assert found[-1] == ("turn_finished", "t-2")
    assert [t for _, t in found].count("t-1") == 4, "the backlog from the start, turn 1 with it"


async def test_until_turn_of_an_ended_turn_sends_the_backlog_and_ends(served: Served) -> None:
    session = "s-done"
    await served.producer.publish(turn(session, "t-1", ["a"]) + turn(session, "t-2", ["b"]))
    await until(lambda: ended(served, session, 6), "both turns committed")
    found = await asyncio.wait_for(follow(served, session, "until_turn=t-1"), 30)
    assert found[-1] == ("turn_finished", "t-1")
    assert all(t == "t-1" for _, t in found)
