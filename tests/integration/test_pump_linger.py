"""Adaptive rounds: with `linger_ms`, a pump woken by one entry waits for more before it reads,
so the entries of a light load commit in one batch instead of one or two per round
(service/runtime/pump.py, `_linger`)."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.inbound import AttemptStarted, InboundEvent, TextDelta, TextStart, TurnStarted
from terminus.events.outbound import AgentMessageChunk
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.polling import until

PARTITIONS = 2
DELTAS = 7


def trickle(session: str) -> list[InboundEvent]:
    ids = {"session_id": session, "turn_id": f"{session}-t"}
    return [
        TurnStarted(**ids, seq=0),  # type: ignore[arg-type]
        AttemptStarted(**ids, seq=1, provider="p", model="m"),  # type: ignore[arg-type]
        TextStart(**ids, seq=2, part_id="a"),  # type: ignore[arg-type]
        *(TextDelta(**ids, seq=3 + n, part_id="a", delta=f"{n} ") for n in range(DELTAS)),  # type: ignore[arg-type]
    ]


async def commits_for_a_trickle(redis: Redis, prefix: str, linger_ms: int) -> int:
    """Commits a worker makes for ten events published 10 ms apart once it is idle."""
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=1000, linger_ms=linger_ms)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings) as worker:
        await until(lambda: owns_all(worker), "the worker to own every partition")
        await asyncio.sleep(0.3)  # idle: every owner in its blocking read
        before = worker.metrics.commits
        session = f"s-{linger_ms}"
        for event in trickle(session):
            await producer.publish([event])
            await asyncio.sleep(0.01)
        await until(lambda: applied(redis, prefix, session), "the trickle committed")
        return worker.metrics.commits - before


async def owns_all(worker: Worker) -> bool:
    owners = [o for pump in worker.pumps for o in pump.owners.values()]
    return len(owners) == PARTITIONS and not any(o.starting for o in owners)


async def applied(redis: Redis, prefix: str, session: str) -> bool:
    """Every delta of the trickle is a frame of its session."""
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    return sum(isinstance(f, AgentMessageChunk) for f in frames) == DELTAS


@pytest.mark.parametrize("linger_ms", [0, 500])
async def test_a_trickle_commits_in_fewer_rounds_with_a_linger(
    redis: Redis, prefix: str, linger_ms: int
) -> None:
    commits = await commits_for_a_trickle(redis, prefix, linger_ms)
    if linger_ms:
        assert commits == 1, "ten entries within the linger: one batch"
    else:
        assert commits >= 3, "without a linger, the trickle takes a round every few entries"
