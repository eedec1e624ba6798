"""Cancels under worker SIGKILLs: a cancel is an inbound entry, applied in one fenced commit, so a
worker killed around it neither loses it nor applies it twice (issue "Adopted in an afternoon
(1/2)", item 3). Each turn is cancelled mid-stream, as a user's Stop does, while its producer
goes on streaming for a while (those events come late); workers are killed throughout. Every
turn ends cancelled with exactly one `turn_finished` and one `turn_concluded`, and every session
is exactly the in-process fold of its log.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from terminus.events.codec import decode_command
from terminus.events.inbound import TurnCancelled
from terminus.events.outbound import TurnConcluded
from terminus.service.redis.replies import xrange
from terminus.service.settings import Settings
from tests.support.backends import Target
from tests.support.faults.expect import assert_all_well, started_turns
from tests.support.faults.harness import (
    Workers,
    fault_settings,
    keys_of,
    kill_busy_and_replace,
    wait_owned,
    wait_quiet,
    wait_until,
)
from tests.support.faults.load import RecordingProducer, TurnPlan, attempt_body, plan_sessions

SESSIONS = plan_sessions(sessions=60, turns=10, cut_every=1_000)
PLANS = [turn for turns in SESSIONS for turn in turns]
KILL_AT = (0.2, 0.4, 0.6, 0.8)  # fractions of the turns cancelled
CHUNK = 8


def cancel_of(plan: TurnPlan) -> TurnCancelled:
    return TurnCancelled(
        session_id=plan.session_id, turn_id=plan.turn_id, seq=0, reason="stop", external=True
    )


async def publish_session(producer: RecordingProducer, turns: list[TurnPlan]) -> None:
    """Each turn streams; a Stop comes after a few chunks, and the producer streams a few more
    before it notices (all in one task, so a session's log order is its publish order)."""
    rng = random.Random(turns[0].session_id)
    for plan in turns:
        turn = producer.turn(plan.session_id, plan.turn_id)
        await turn.start()
        await turn.start_attempt(provider="fault", model="m-1", contract="ai-sdk")
        body = attempt_body(plan, 1, complete=True)
        stop_at = rng.randrange(1, len(body) // CHUNK)
        for n, start in enumerate(range(0, len(body), CHUNK)):
            if n == stop_at:
                await producer.publish([cancel_of(plan)])
            if n > stop_at + 1:
                break
            await turn.add(body[start : start + CHUNK])


def cancelled(producer: RecordingProducer) -> int:
    return sum(isinstance(e, TurnCancelled) for es in producer.published.values() for _, e in es)


async def concluded(redis_reader: RecordingProducer, settings: Settings) -> dict[str, list[str]]:
    """turn id -> the states of its turn_concluded commands."""
    found: dict[str, list[str]] = {}
    for key in {keys_of(settings, p.session_id).commands for p in PLANS}:
        for _, fields in await xrange(redis_reader.redis, key):
            command = decode_command(fields[b"e"])
            if isinstance(command, TurnConcluded):
                found.setdefault(command.turn_id, []).append(command.state)
    return found


@pytest.mark.cluster
async def test_cancels_survive_worker_kills_exactly_once(
    fault_target: Target, tmp_path: Path
) -> None:
    settings = fault_settings(fault_target.url, redis_cluster=fault_target.cluster)
    redis = fault_target.client()
    rng = random.Random(20261126)
    try:
        with Workers(settings, tmp_path) as workers:
            for _ in range(3):
                workers.start()
            await wait_owned(redis, settings, workers=3)
            producer = RecordingProducer(redis, settings)
            load = asyncio.gather(*(publish_session(producer, turns) for turns in SESSIONS))
            left: list[int] = []
            for mark in KILL_AT:

                async def passed(mark: float = mark) -> bool:
                    return load.done() or cancelled(producer) >= mark * len(PLANS)

                await wait_until(passed, f"{mark:.0%} of the turns cancelled", timeout=120)
                if load.done():
                    break
                left.append(await kill_busy_and_replace(redis, settings, workers, rng))
            await load
            await wait_quiet(redis, settings, started_turns(producer.published))
            assert len(left) >= 3, "the load ended before three workers were killed"
            assert sum(left) > 0, "no worker was killed with a batch in hand"
            await assert_all_well(redis, settings, producer.published, workers)
            states = await concluded(producer, settings)
            assert states == {plan.turn_id: ["cancelled"] for plan in PLANS}
    finally:
        await redis.aclose()
