"""Leaving a subscription, in a script of its own: `async for u in subscribe(...): break` as the
last thing a script does, the same inside `async with subscribe(...) as updates`, and a `break`
in a script that goes on. Each must print nothing on stderr (before issue 31 the first printed
"RuntimeError: aclose(): asynchronous generator is already running" from the loop's shutdown)
and leave no task and no open connection behind, over either source."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from subscriber_support import KINDS, PARTITIONS, Served, serve, token

from terminus.events.codec import encode_json
from terminus.events.outbound import AgentMessageChunk
from terminus.service.keys import FIELD, keys_for_session

SCRIPT = """
import asyncio, gc, os, sys
from redis.asyncio import Redis
from terminus import GatewaySource, RedisSource, subscribe

async def main() -> None:
    env = os.environ
    redis = Redis.from_url(env["T_REDIS_URL"])
    if env["T_SOURCE"] == "redis":
        source = RedisSource(redis, int(env["T_PARTITIONS"]), env["T_PREFIX"], block_ms=200)
    else:
        source = GatewaySource(env["T_BASE"], env["T_TOKEN"])
    if env["T_FORM"] == "async-with":
        async with subscribe(env["T_SESSION"], source=source) as updates:
            async for update in updates:
                print(update.kind)
                break
    else:
        async for update in subscribe(env["T_SESSION"], source=source):
            print(update.kind)
            break
    if env["T_FORM"] == "break-and-go-on":
        await asyncio.sleep(0.5)
        gc.collect()
        print(len(asyncio.all_tasks()) - 1, "tasks left")
    await redis.aclose()

asyncio.run(main())
"""
FORMS = ("break-at-the-end", "async-with", "break-and-go-on")


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    async with serve(redis, prefix) as running:
        yield running


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
async def test_leaving_a_subscription_leaves_nothing_behind(
    served: Served, redis_url: str, kind: str, form: str
) -> None:
    session = f"s-leave-{kind}-{form}"
    await _frames(served, session, 3)
    env = {
        **os.environ,
        "T_REDIS_URL": redis_url,
        "T_PREFIX": served.settings.prefix,
        "T_PARTITIONS": str(PARTITIONS),
        "T_SOURCE": kind,
        "T_BASE": served.base,
        "T_TOKEN": token(session),
        "T_SESSION": session,
        "T_FORM": form,
    }
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-W", "default", "-c", SCRIPT),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert err.decode() == ""
    assert proc.returncode == 0
    expected = ["agent_message_chunk"]
    if form == "break-and-go-on":
        expected.append("0 tasks left")
    assert out.decode().splitlines() == expected


async def _frames(served: Served, session: str, n: int) -> None:
    key = keys_for_session(session, PARTITIONS, served.settings.prefix).session(session)
    for i in range(n):
        chunk = AgentMessageChunk(
            session_id=session, turn_id="t-1", step=1, attempt=1, part_id="p0", delta=f"w{i} "
        )
        await served.redis.xadd(key, {FIELD: encode_json(chunk)})
