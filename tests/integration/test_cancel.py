"""A user's Stop: `POST /v1/sessions/{id}/turns/{turn}/cancel` on the gateway ends a live turn
whose provider is still streaming. The runner's request stops, the open attempt's parts are
discarded, subscribers get one frame saying so, and the producer one turn_concluded (issue:
"Adopted in an afternoon (1/2)", item 3)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final, NamedTuple

import httpx
import pytest
from redis.asyncio import Redis
from serving import running_worker, serving

from terminus.events.outbound import AttemptDiscarded, TurnFinished
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.keys import keys_for_session, partition_of
from terminus.service.redis.replies import xrange
from terminus.service.sdk.callers import anthropic
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnCancelled, TurnRunner
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.fake_provider import Reply, fake_provider
from tests.support.polling import until

PARTITIONS: Final = 4
SECRET: Final = b"cancel-test-secret-0123456789abc"
ANTHROPIC = Path(__file__).parents[1] / "fixtures/provider-streams/anthropic"
ANSWER = (ANTHROPIC / "text-basic-ping-sdk-python.sse").read_bytes().rstrip(b"\n") + b"\n\n"
HALF = ANSWER[: ANSWER.index(b"event: content_block_stop")]  # text streamed, then silence
SSE = {"content-type": "text/event-stream"}


class Served(NamedTuple):
    base: str
    redis: Redis
    settings: Settings
    runner: TurnRunner


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    runner = TurnRunner(Producer(redis, partitions=PARTITIONS, prefix=prefix), 30)
    app = create_gateway(redis, settings, SECRET)
    async with running_worker(redis, settings), serving(app) as base:
        yield Served(base, redis, settings, runner)
    await runner.close()


def token(session: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {mint(SECRET, session, int(time.time()) + 600)}"}


async def streaming(served: Served, session: str, turn: str) -> bool:
    frames = await session_updates(
        served.redis, session, partitions=PARTITIONS, prefix=served.settings.prefix
    )
    return any(f.turn_id == turn and type(f).__name__ == "AgentMessageChunk" for f in frames)


async def test_a_stop_mid_stream_ends_the_turn_and_the_request(served: Served) -> None:
    session, turn = "s-stop", "t-stop"
    async with fake_provider([Reply(200, HALF, SSE, hold=True)]) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        running = asyncio.create_task(served.runner.run_turn(session, turn, call))
        await until(lambda: streaming(served, session, turn), "the answer streaming")
        async with httpx.AsyncClient(base_url=served.base) as client:
            url = f"/v1/sessions/{session}/turns/{turn}/cancel"
            answer = await client.post(url, headers=token(session), params={"reason": "stop"})
        assert answer.status_code == 202, answer.text
        with pytest.raises(TurnCancelled):
            await asyncio.wait_for(running, 30)
        assert len(provider.requests) == 1, "the held request was not retried"
    frames = await session_updates(
        served.redis, session, partitions=PARTITIONS, prefix=served.settings.prefix
    )
    discarded = [f for f in frames if isinstance(f, AttemptDiscarded)]
    assert [(d.attempt, d.reason) for d in discarded] == [(1, "stop")]
    assert discarded[0].part_ids
    assert [f.stopReason for f in frames if isinstance(f, TurnFinished)] == ["cancelled"]
    keys = keys_for_session(session, PARTITIONS, served.settings.prefix)
    commands = await xrange(served.redis, keys.commands)
    assert [b'"turn_concluded"' in fields[b"e"] for _, fields in commands].count(True) == 1


@pytest.mark.parametrize(
    ("who", "turn", "status"),
    [
        ("other-session", "t-live", 403),
        ("own-session", "t-unknown", 404),
        ("own-session", "t-done", 409),
        ("operator", "t-unknown", 404),
    ],
)
async def test_a_cancel_is_refused_when_it_cannot_apply(
    served: Served, who: str, turn: str, status: int
) -> None:
    session = "s-refuse"
    async with fake_provider([Reply(200, ANSWER, SSE)]) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        await served.runner.run_turn(session, "t-done", call)
    tokens = {"other-session": "s-other", "own-session": session, "operator": None}
    async with httpx.AsyncClient(base_url=served.base) as client:
        url = f"/v1/sessions/{session}/turns/{turn}/cancel"
        answer = await client.post(url, headers=token(tokens[who]))
    assert answer.status_code == status, answer.text
    keys = keys_for_session(session, PARTITIONS, served.settings.prefix)
    assert await served.redis.xlen(keys.dead) == 0, "nothing was published to dead-letter"


def neighbour(session: str) -> str:
    """Another session in the same partition as `session`: the one place a turn id alone could
    reach another session's turn."""
    home = partition_of(session, PARTITIONS)
    return next(f"s-n{n}" for n in range(1000) if partition_of(f"s-n{n}", PARTITIONS) == home)


async def test_a_session_cannot_cancel_a_turn_of_its_partition_neighbour(served: Served) -> None:
    session, turn = "s-victim", "t-victim"
    other = neighbour(session)
    async with fake_provider([Reply(200, HALF, SSE, hold=True)]) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        running = asyncio.create_task(served.runner.run_turn(session, turn, call))
        await until(lambda: streaming(served, session, turn), "the answer streaming")
        async with httpx.AsyncClient(base_url=served.base) as client:
            url = f"/v1/sessions/{other}/turns/{turn}/cancel"
            answer = await client.post(url, headers=token(other))
        assert answer.status_code == 404, answer.text
        assert not running.done(), "the victim's turn went on"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    frames = await session_updates(
        served.redis, session, partitions=PARTITIONS, prefix=served.settings.prefix
    )
    assert not [f for f in frames if isinstance(f, TurnFinished)], "nothing ended the turn"
    keys = keys_for_session(other, PARTITIONS, served.settings.prefix)
    inbound = [fields[b"e"] for _, fields in await xrange(served.redis, keys.inbound)]
    assert not [e for e in inbound if b"turn-cancelled" in e], "no cancel was published"


async def terminus(*args: str) -> tuple[int, str, str]:
    """Run `terminus ARGS` with the environment the fixtures set; exit status and output."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "terminus",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.usefixtures("redis_env")
async def test_terminus_cancel_ends_a_live_turn_once(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERMINUS_PREFIX", served.settings.prefix)
    monkeypatch.setenv("TERMINUS_PARTITIONS", str(PARTITIONS))
    session, turn_id = "s-cli", "t-cli"
    turn = Producer(served.redis, partitions=PARTITIONS, prefix=served.settings.prefix).turn(
        session, turn_id
    )
    await turn.start()
    await turn.start_attempt(provider="anthropic")
    await turn.feed_bytes(HALF)
    await until(lambda: streaming(served, session, turn_id), "the answer streaming")
    status, out, err = await terminus("cancel", "--session", session, turn_id)
    assert status == 0, err
    assert json.loads(out)["cancel"] == "requested"

    async def cancelled() -> bool:
        frames = await session_updates(
            served.redis, session, partitions=PARTITIONS, prefix=served.settings.prefix
        )
        return any(isinstance(f, TurnFinished) and f.stopReason == "cancelled" for f in frames)

    await until(cancelled, "the turn cancelled")
    status, _, err = await terminus("cancel", "--session", session, turn_id)
    assert status == 1
    assert "the turn has ended" in err
