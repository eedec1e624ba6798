"""Producers over HTTP (service/gateway/producing.py) on uvicorn, over a real Redis and a real
worker: raw provider bytes POSTed as attempts become the same message and frames as `terminus
simulate` gives on those bytes; producer tokens publish into their own session only, read
nothing, and are rate-limited."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final, NamedTuple

import httpx
import pytest
from redis.asyncio import Redis
from serving import running_worker, serving

from terminus.events.codec import decode_message
from terminus.events.outbound import AgentMessageChunk, SessionUpdate
from terminus.service.cli.simulate import Outcome, simulate
from terminus.service.gateway.producing import ProducerRate
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.keys import Keys, partition_of
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.tee_scenes import comparable, comparable_frames

PARTITIONS: Final = 4
SECRET: Final = b"producer-route-secret-0123456789"
STREAMS: Final = Path(__file__).parents[1] / "fixtures/provider-streams"
ANSWER_FILE: Final = STREAMS / "anthropic/text-recorded-fantasy.sse"
ANSWER: Final = ANSWER_FILE.read_bytes()
RATE_BODY: Final = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'


class Gateway(NamedTuple):
    base: str
    redis: Redis
    prefix: str


@pytest.fixture
async def gateway(redis: Redis, prefix: str) -> AsyncIterator[Gateway]:
    # One event per provider event: the frames are simulate's, each delta as the provider sent
    # it (the default coalesces each body read's: `test_by_default_each_body_read...`).
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, coalesce_reads=False)
    app = create_gateway(redis, settings, SECRET)
    async with running_worker(redis, settings), serving(app) as base:
        yield Gateway(base, redis, prefix)


def producer_token(session: str) -> dict[str, str]:
    token = mint(SECRET, session, int(time.time()) + 600, producer=True)
    return {"Authorization": f"Bearer {token}"}


async def pieces(data: bytes, size: int = 97) -> AsyncIterator[bytes]:
    """The body streamed in pieces (chunked): lines and characters split anywhere."""
    for at in range(0, len(data), size):
        yield data[at : at + size]


async def post_attempt(
    http: httpx.AsyncClient,
    path: str,
    session: str,
    body: bytes | AsyncIterator[bytes],
    **headers: str,
) -> httpx.Response:
    """The body POSTed as the pieces given, or in `pieces` of the default size."""
    sent = {"x-terminus-provider": "anthropic", **producer_token(session), **headers}
    content = pieces(body) if isinstance(body, bytes) else body
    return await http.post(path + "/attempts", headers=sent, content=content)


def simulated_answer(session: str, turn: str) -> Outcome:
    """What simulate makes of `ANSWER` as one attempt of the turn."""
    return simulate([ANSWER_FILE], provider="anthropic", session_id=session, turn_id=turn)


async def decision(http: httpx.AsyncClient, path: str, session: str, after: str) -> str:
    """The type of the first command about the turn after `after`, read from the SSE route."""
    kind: str = (await command(http, path, session, after))["type"]
    return kind


async def command(http: httpx.AsyncClient, path: str, session: str, after: str) -> Any:
    """The first command about the turn after `after`, read from the SSE route."""
    query = {"from": after, "until_decision": "1"}
    headers = producer_token(session)
    async with http.stream("GET", path + "/commands", params=query, headers=headers) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith("data: "):
                return json.loads(line.removeprefix("data: "))
    raise AssertionError("the commands stream ended without a command")


async def committed(gw: Gateway, session: str, turn: str) -> tuple[Any, list[SessionUpdate]]:
    keys = Keys(partition_of(session, PARTITIONS), gw.prefix)
    raw = await gw.redis.hget(keys.messages(session), f"msg-{turn}")
    frames = await session_updates(gw.redis, session, partitions=PARTITIONS, prefix=gw.prefix)
    return (None if raw is None else decode_message(raw)), [comparable(f) for f in frames]


async def test_an_attempt_posted_as_raw_bytes_is_what_simulate_gives(gateway: Gateway) -> None:
    session, turn = "s-http-1", "t-http-1"
    path = f"{gateway.base}/v1/sessions/{session}/turns/{turn}"
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await post_attempt(http, path, session, ANSWER)
        assert answer.status_code == 200, answer.text
        published = answer.json()
        assert (published["step"], published["attempt"]) == (1, 1)
        assert await decision(http, path, session, published["commands_from"]) == "turn_concluded"
    expected = simulated_answer(session, turn)
    message, frames = await committed(gateway, session, turn)
    assert message is not None
    assert message == expected.message
    assert frames == [comparable(f) for f in expected.updates]


async def test_a_cut_and_a_429_are_retried_as_simulate_says(
    gateway: Gateway, tmp_path: Path
) -> None:
    session, turn = "s-http-2", "t-http-2"
    path = f"{gateway.base}/v1/sessions/{session}/turns/{turn}"
    cut = ANSWER[: len(ANSWER) // 2]
    headers = {"retry-after": "0", "content-type": "application/json"}
    upstream = {f"x-terminus-upstream-header-{k}": v for k, v in headers.items()}
    async with httpx.AsyncClient(timeout=30) as http:
        first = await post_attempt(http, path, session, cut)
        assert await decision(http, path, session, first.json()["commands_from"]) == (
            "retry_scheduled"
        )
        second = await post_attempt(
            http, path, session, RATE_BODY, **upstream, **{"x-terminus-upstream-status": "429"}
        )
        assert second.json()["attempt"] == 2
        assert await decision(http, path, session, second.json()["commands_from"]) == (
            "retry_scheduled"
        )
        third = await post_attempt(http, path, session, ANSWER, **{"x-terminus-attempt": "3"})
        assert await decision(http, path, session, third.json()["commands_from"]) == (
            "turn_concluded"
        )
    files = [tmp_path / "cut.sse", tmp_path / "429.json", tmp_path / "whole.sse"]
    files[0].write_bytes(cut)
    recorded = {"status_code": 429, "headers": headers, "body": json.loads(RATE_BODY)}
    files[1].write_text(json.dumps(recorded))
    files[2].write_bytes(ANSWER)
    expected = simulate(files, provider="anthropic", session_id=session, turn_id=turn)
    assert expected.state == "finished"
    message, frames = await committed(gateway, session, turn)
    assert message == expected.message
    assert frames == [comparable(f) for f in expected.updates]


async def test_tool_results_and_the_next_step_posted_as_simulate_says(
    gateway: Gateway, tmp_path: Path
) -> None:
    session, turn = "s-http-tools", "t-http-tools"
    path = f"{gateway.base}/v1/sessions/{session}/turns/{turn}"
    tool_use = STREAMS / "anthropic/tool-use-recorded-fantasy.sse"
    async with httpx.AsyncClient(timeout=30) as http:
        first = (await post_attempt(http, path, session, tool_use.read_bytes())).json()
        required = await command(http, path, session, first["commands_from"])
        assert required["type"] == "tools_required"
        outcomes = [
            {"type": "tool-result", "tool_call_id": tool["tool_call_id"], "output": "22 C"}
            for tool in required["tools"]
        ]
        published = await http.post(
            path + "/events",
            headers=producer_token(session),
            json={"events": outcomes, "next_seq": first["next_seq"]},
        )
        assert published.status_code == 200, published.text
        second = await post_attempt(http, path, session, ANSWER, **{"x-terminus-step": "2"})
        assert (second.json()["step"], second.json()["attempt"]) == (2, 1)
        assert await decision(http, path, session, second.json()["commands_from"]) == (
            "turn_concluded"
        )
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(o) + "\n" for o in outcomes))
    whole = tmp_path / "whole.sse"
    whole.write_bytes(ANSWER)
    expected = simulate(
        [tool_use, results, whole], provider="anthropic", session_id=session, turn_id=turn
    )
    assert expected.state == "finished"
    message, frames = await committed(gateway, session, turn)
    assert message == expected.message
    assert frames == [comparable(f) for f in expected.updates]


def neighbour(session: str) -> str:
    """Another session of the same partition (turn ids are keyed per partition)."""
    home = partition_of(session, PARTITIONS)
    return next(
        f"{session}-n{n}" for n in range(100) if partition_of(f"{session}-n{n}", PARTITIONS) == home
    )


async def test_a_producer_token_publishes_into_its_own_session_only(gateway: Gateway) -> None:
    owner = "s-http-owner"
    other = neighbour(owner)
    base = gateway.base
    async with httpx.AsyncClient(timeout=30) as http:
        started = await post_attempt(
            http, f"{base}/v1/sessions/{owner}/turns/t-owned", owner, ANSWER
        )
        assert started.status_code == 200
        await decision(http, f"{base}/v1/sessions/{owner}/turns/t-owned", owner, "0-0")
        inbound = Keys(partition_of(owner, PARTITIONS), gateway.prefix).inbound
        before = await gateway.redis.xlen(inbound)
        # Another session's producer naming the owner's turn id: refused, nothing published.
        foreign = await post_attempt(
            http, f"{base}/v1/sessions/{other}/turns/t-owned", other, ANSWER
        )
        assert foreign.status_code == 409
        events = await http.post(
            f"{base}/v1/sessions/{other}/turns/t-owned/events",
            headers=producer_token(other),
            json={"events": [{"type": "turn-ended", "reason": "x"}]},
        )
        assert events.status_code == 409
        # The owner's producer token, on another session's path: refused.
        crossed = await post_attempt(http, f"{base}/v1/sessions/{other}/turns/t-new", owner, ANSWER)
        assert crossed.status_code == 403
        assert await gateway.redis.xlen(inbound) == before
        for read in (
            f"/v1/sessions/{owner}/updates?until_end=1",
            f"/v1/sessions/{owner}/messages",
            "/v1/turns/t-owned",
            f"/v1/turns/t-owned/timeline?session={owner}",
            "/v1/admin/turns",
            "/metrics",
        ):
            answer = await http.get(base + read, headers=producer_token(owner))
            assert answer.status_code == 403, read
        signed = await http.post(base + "/v1/session-cookie", headers=producer_token(owner))
        assert signed.status_code == 403
        # A reader's token cannot publish.
        reader = mint(SECRET, owner, int(time.time()) + 600)
        refused = await http.post(
            f"{base}/v1/sessions/{owner}/turns/t-2/attempts",
            headers={"x-terminus-provider": "anthropic", "Authorization": f"Bearer {reader}"},
            content=ANSWER,
        )
        assert refused.status_code == 403


async def test_producer_requests_are_rate_limited(redis: Redis, prefix: str) -> None:
    settings = Settings(prefix=prefix, partitions=PARTITIONS)
    limits = Limits(producer_rate=ProducerRate(per_s=0.2, burst=3))
    session = "s-http-rate"
    body = {"events": [{"type": "turn-ended"}]}
    headers = producer_token(session)
    async with serving(create_gateway(redis, settings, SECRET, limits)) as base:
        path = f"{base}/v1/sessions/{session}/turns/no-turn/events"
        async with httpx.AsyncClient(timeout=30) as http:
            statuses = [(await http.post(path, headers=headers, json=body)) for _ in range(4)]
    assert [s.status_code for s in statuses] == [404, 404, 404, 429]
    assert int(statuses[-1].headers["retry-after"]) >= 1


async def test_by_default_each_body_read_publishes_one_delta_of_a_part(
    redis: Redis, prefix: str
) -> None:
    """TERMINUS_COALESCE_READS (on by default): the same answer, POSTed in pieces, is fewer
    deltas (one per read of the body at most, where the provider sent one per token), the same
    text and the same message."""
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    gw = Gateway("", redis, prefix)
    async with (
        running_worker(redis, settings),
        serving(create_gateway(redis, settings, SECRET)) as base,
    ):
        session, turn = "s-http-merged", "t-http-merged"
        path = f"{base}/v1/sessions/{session}/turns/{turn}"
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await post_attempt(http, path, session, pieces(ANSWER, 2048))
            assert answer.status_code == 200, answer.text
            commands_from = answer.json()["commands_from"]
            assert await decision(http, path, session, commands_from) == "turn_concluded"
    expected = simulated_answer(session, turn)
    message, frames = await committed(gw, session, turn)
    assert message == expected.message
    deltas = [f for f in frames if isinstance(f, AgentMessageChunk)]
    provider_deltas = [f for f in expected.updates if isinstance(f, AgentMessageChunk)]
    assert 0 < len(deltas) < len(provider_deltas)
    assert comparable_frames(frames) == comparable_frames(expected.updates)
