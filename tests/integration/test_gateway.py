"""The HTTP gateway served by uvicorn on a loopback port, over a real Redis and a running worker:
SSE fan-out and resume, tokens, limits (DESIGN sections 4 and 7).

Every SSE client here asks for `until_end=1`, so a stream ends by itself after the turn's last
frame; a client that stops early closes its connection, as a browser tab does.
"""

from __future__ import annotations

import asyncio
import random
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
    StreamClosed,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.polling import until

PARTITIONS: Final = 4
SECRET: Final = b"gateway-test-secret-0123456789"
DEADLINE_S: Final = 30.0
STREAM_OPENS: Final = 20  # per token and minute, in the fixture's gateway


class Sse(NamedTuple):
    id: str
    event: str
    data: dict[str, Any]


class Served(NamedTuple):
    base: str
    redis: Redis
    settings: Settings
    producer: Producer


def turn_events(session: str, turn: str, deltas: int) -> list[InboundEvent]:
    """A complete one-attempt turn of `deltas` text deltas."""
    events: list[InboundEvent] = [
        TurnStarted(session_id=session, turn_id=turn, seq=0),
        AttemptStarted(session_id=session, turn_id=turn, seq=1, provider="p", model="m"),
        TextStart(session_id=session, turn_id=turn, seq=2, part_id="a"),
    ]
    for n in range(deltas):
        events.append(
            TextDelta(session_id=session, turn_id=turn, seq=3 + n, part_id="a", delta=f"{n} ")
        )
    seq = 3 + deltas
    events += [
        TextEnd(session_id=session, turn_id=turn, seq=seq, part_id="a"),
        FinishStep(
            session_id=session,
            turn_id=turn,
            seq=seq + 1,
            finish_reason="stop",
            raw_finish_reason="end_turn",
            usage=Usage(output_tokens=deltas),
        ),
        StreamClosed(session_id=session, turn_id=turn, seq=seq + 2),
    ]
    return events


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    """A worker and the gateway (uvicorn, loopback) on the test's prefix."""
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=200)
    limits = Limits(stream_opens=STREAM_OPENS, stream_window_s=60.0)
    app = create_gateway(redis, settings, SECRET, limits)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings), serving(app) as base:
        yield Served(base, redis, settings, producer)


def token(session: str | None, ttl: int = 600) -> str:
    return mint(SECRET, session, int(time.time()) + ttl)


async def read_sse(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    stop_after: int | None = None,
) -> list[Sse]:
    """Events of one SSE response, until it ends (or after `stop_after` events)."""
    events: list[Sse] = []
    fields: dict[str, str] = {}
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line == "":
                if "data" in fields:
                    data = msgspec.json.decode(fields["data"])
                    events.append(Sse(fields.get("id", ""), fields.get("event", ""), data))
                    if stop_after is not None and len(events) >= stop_after:
                        return events
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    return events


def updates_url(base: str, session: str) -> str:
    return f"{base}/v1/sessions/{session}/updates?until_end=1"


def auth(session: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(session)}"}


async def stored_cursors(served: Served, session: str) -> list[str]:
    settings = served.settings
    frames = await session_updates(
        served.redis, session, partitions=settings.partitions, prefix=settings.prefix
    )
    return [f.cursor or "" for f in frames]


@pytest.mark.cluster  # the hub reads per slot on a cluster
async def test_three_clients_of_one_session_get_the_same_frames_in_the_same_order(
    served: Served,
) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        readers = [
            asyncio.create_task(read_sse(client, updates_url(served.base, "s-1"), auth("s-1")))
            for _ in range(3)
        ]
        await asyncio.sleep(0.2)  # the clients wait on a live stream, then the turn streams in
        for chunk in _chunks(turn_events("s-1", "t-1", 40), 7):
            await served.producer.publish(chunk)
            await asyncio.sleep(0.01)
        received = await asyncio.gather(*readers)
    stored = await stored_cursors(served, "s-1")
    assert len(stored) > 40
    for events in received:
        assert [e.id for e in events] == stored
        assert events[-1].event == "turn_finished"
        assert all(e.data["session_id"] == "s-1" for e in events)


async def test_a_client_resuming_with_last_event_id_gets_exactly_the_missing_frames(
    served: Served,
) -> None:
    await served.producer.publish(turn_events("s-2", "t-2", 60))
    await until(lambda: _ended(served, "s-2"), "the turn's last frame")
    stored = await stored_cursors(served, "s-2")
    rng = random.Random(7)
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        for _ in range(5):
            cut = rng.randrange(1, len(stored))
            url = updates_url(served.base, "s-2")
            first = await read_sse(client, url, auth("s-2"), stop_after=cut)
            headers = {**auth("s-2"), "Last-Event-ID": first[-1].id}
            rest = await read_sse(client, url, headers)
            assert [e.id for e in first + rest] == stored, f"cut after {cut}"
            by_query = await read_sse(client, f"{url}&from={first[-1].id}", auth("s-2"))
            assert [e.id for e in by_query] == [e.id for e in rest]


@pytest.mark.cluster  # the hub reads per slot on a cluster
async def test_a_live_client_skips_what_a_late_joiner_makes_the_hub_read_again(
    served: Served,
) -> None:
    """One reader serves a session's clients; a client joining from an old cursor moves the
    read back, and the clients already past those frames must not get them twice."""
    await served.producer.publish(turn_events("s-5", "t-5a", 20))
    await until(lambda: _ended(served, "s-5"), "the first turn's last frame")
    first_turn = await stored_cursors(served, "s-5")
    url = f"{served.base}/v1/sessions/s-5/updates"
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        total = 2 * len(first_turn)  # the second turn has as many frames
        live = asyncio.create_task(read_sse(client, url, auth("s-5"), stop_after=total))
        await asyncio.sleep(0.5)  # the live client has read the first turn and waits
        late_headers = {**auth("s-5"), "Last-Event-ID": first_turn[0]}
        late = asyncio.create_task(read_sse(client, url, late_headers, stop_after=total - 1))
        await asyncio.sleep(0.3)
        await served.producer.publish(turn_events("s-5", "t-5b", 20))
        live_got, late_got = await asyncio.gather(live, late)
    stored = await stored_cursors(served, "s-5")
    assert len(stored) == total
    assert [e.id for e in live_got] == stored
    assert [e.id for e in late_got] == stored[1:]


@pytest.mark.cluster  # the hub reads per slot on a cluster
async def test_two_hundred_sessions_never_see_each_other_s_frames(served: Served) -> None:
    sessions = [f"many-{n}" for n in range(200)]
    limits = httpx.Limits(max_connections=250)
    async with httpx.AsyncClient(timeout=DEADLINE_S * 2, limits=limits) as client:
        readers = [
            asyncio.create_task(read_sse(client, updates_url(served.base, s), auth(s)))
            for s in sessions
        ]
        events = [e for s in sessions for e in turn_events(s, f"t-{s}", 5)]
        await served.producer.publish(events)
        received = await asyncio.gather(*readers)
    for session, got in zip(sessions, received, strict=True):
        assert got, session
        assert {e.data["session_id"] for e in got} == {session}
        assert [e.id for e in got] == await stored_cursors(served, session)


async def test_the_token_matrix(served: Served) -> None:
    await served.producer.publish(turn_events("s-3", "t-3", 3))
    await until(lambda: _ended(served, "s-3"), "the turn's last frame")
    expired = mint(SECRET, "s-3", int(time.time()) - 1)
    cases: list[tuple[dict[str, str], int]] = [
        ({}, 401),
        ({"Authorization": "Bearer v1.s-czM.1.forged"}, 401),
        ({"Authorization": f"Bearer {expired}"}, 401),
        ({"Authorization": f"Bearer {mint(b'another-secret-0123456', 's-3', 2**40)}"}, 401),
        (auth("s-other"), 403),
        (auth(None), 403),
        (auth("s-3"), 200),
    ]
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        for headers, status in cases:
            for path in ("messages", "updates?until_end=1"):
                url = f"{served.base}/v1/sessions/s-3/{path}"
                async with client.stream("GET", url, headers=headers) as response:
                    assert response.status_code == status, (headers, path)
                    body = await response.aread()
                    if status != 200:
                        assert b"s-3" not in body or b"error" in body
        query = await client.get(f"{served.base}/v1/sessions/s-3/messages?token={token('s-3')}")
        assert query.status_code == 200
        assert query.json()["total"] == 1
        turn = await client.get(f"{served.base}/v1/turns/t-3", headers=auth("s-3"))
        assert turn.status_code == 200
        assert turn.json()["state"] == "finished"
        other = await client.get(f"{served.base}/v1/turns/t-3", headers=auth("s-other"))
        assert other.status_code == 404
        admin = await client.get(f"{served.base}/v1/turns/t-3?session=s-3", headers=auth(None))
        assert admin.status_code == 200
        body_sent = await client.request(
            "GET", f"{served.base}/v1/sessions/s-3/messages", headers=auth("s-3"), content=b"x"
        )
        assert body_sent.status_code == 413


async def test_stream_opens_per_token_are_bounded(served: Served) -> None:
    await served.producer.publish(turn_events("s-4", "t-4", 1))
    await until(lambda: _ended(served, "s-4"), "the turn's last frame")
    headers = auth("s-4")
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        for _ in range(STREAM_OPENS):
            assert await read_sse(client, updates_url(served.base, "s-4"), headers)
        refused = await client.get(updates_url(served.base, "s-4"), headers=headers)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        fresh = {"Authorization": f"Bearer {token('s-4', ttl=601)}"}
        another = await read_sse(client, updates_url(served.base, "s-4"), fresh)
        assert another  # a fresh token has its own budget


async def test_health(served: Served) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{served.base}/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


async def _ended(served: Served, session: str) -> bool:
    settings = served.settings
    frames = await session_updates(
        served.redis, session, partitions=settings.partitions, prefix=settings.prefix
    )
    return bool(frames) and type(frames[-1]).__struct_config__.tag == "turn_finished"


def _chunks(items: list[InboundEvent], size: int) -> list[list[InboundEvent]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
