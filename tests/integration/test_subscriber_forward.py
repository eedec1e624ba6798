"""A newer server's session stream (docs/schema.md, "Frames"): `subscribe` passes over a frame
of a kind this SDK does not know, counts it and reports it once, and never raises; a field it
does not know on a known frame is ignored. Over both sources: `RedisSource` on a session stream
a newer worker wrote, and `GatewaySource` on a stand-in for a newer gateway that ends its stream
right after the unknown frame, so the resume delivers that frame again."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

from redis.asyncio import Redis
from serving import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from terminus.service.keys import FIELD, keys_for_session
from terminus.service.sdk.subscriber import (
    Backoff,
    GatewaySource,
    LiveSession,
    RedisSource,
    Update,
    subscribe,
)
from terminus.service.sdk.updates import UnknownFrames

PARTITIONS: Final = 4
FAST: Final = Backoff(initial_s=0.01, max_s=0.05, give_up_after_s=10)
IDS: Final = {"session_id": "s-fw", "turn_id": "t-fw"}
# What a newer server writes: a known chunk with a field of its own, a kind of its own, a plain
# chunk, and the turn's end (stopped by its user), with a field of its own too.
FRAMES: Final[list[dict[str, Any]]] = [
    {
        **IDS,
        "sessionUpdate": "agent_message_chunk",
        "step": 1,
        "attempt": 1,
        "part_id": "p",
        "delta": "Gany",
        "confidence": 0.5,
    },
    {**IDS, "sessionUpdate": "usage_forecast", "tokens_left": 900},
    {
        **IDS,
        "sessionUpdate": "agent_message_chunk",
        "step": 1,
        "attempt": 1,
        "part_id": "p",
        "delta": "mede",
    },
    {
        **IDS,
        "sessionUpdate": "turn_finished",
        "stopReason": "cancelled",
        "usage": {"output_tokens": 2},
        "billing": {"usd": 0.001},
    },
]


async def followed(source: RedisSource | GatewaySource) -> tuple[list[Update], LiveSession]:
    view, got = LiveSession(), []
    async with asyncio.timeout(20):
        async for update in subscribe("s-fw", source=source, until_turn="t-fw", backoff=FAST):
            got.append(update)
            view.apply(update)
    return got, view


def assert_read_alike(got: list[Update], view: LiveSession, unknown: UnknownFrames) -> None:
    assert [u.kind for u in got] == ["agent_message_chunk", "agent_message_chunk", "turn_finished"]
    assert view.text("t-fw") == "Ganymede"
    assert view.turns["t-fw"].status == "cancelled"
    assert unknown.counts == {"usage_forecast": 1}


async def test_redis_source_passes_over_a_newer_workers_kind(redis: Redis, prefix: str) -> None:
    key = keys_for_session("s-fw", PARTITIONS, prefix).session("s-fw")
    for frame in FRAMES:
        await redis.xadd(key, {FIELD: json.dumps(frame)})
    reported: list[str] = []
    unknown = UnknownFrames(report=lambda kind, cursor: reported.append(kind))
    source = RedisSource(redis, PARTITIONS, prefix, block_ms=100, unknown_frames=unknown)
    got, view = await followed(source)
    assert_read_alike(got, view, unknown)
    assert reported == ["usage_forecast"]


def sse(n: int) -> str:
    return f"id: 5-{n}\ndata: {json.dumps(FRAMES[n])}\n\n"


async def test_gateway_source_passes_over_a_newer_gateways_kind() -> None:
    asked: list[str | None] = []

    async def updates(request: Request) -> Response:
        asked.append(request.headers.get("last-event-id"))
        body = sse(0) + sse(1) if len(asked) == 1 else sse(1) + sse(2) + sse(3)
        return Response(body, media_type="text/event-stream")

    reported: list[str] = []
    unknown = UnknownFrames(report=lambda kind, cursor: reported.append(f"{kind}@{cursor}"))
    stand_in = Starlette(routes=[Route("/v1/sessions/{session}/updates", updates)])
    async with serving(stand_in) as base:
        got, view = await followed(GatewaySource(base, "tok", unknown_frames=unknown))
    assert_read_alike(got, view, unknown)
    assert reported == ["usage_forecast@5-1"], "reported once, though delivered twice"
    assert asked == [None, "5-0"]
