"""Adaptive rounds: with `linger_ms`, a pump at light load lets entries gather between rounds,
so the entries of a light load commit in a few batches instead of one or two per round
(service/runtime/pump.py, `_pace`): a pump woken by one entry waits for more before it reads,
and while entries keep trickling in, rounds (their commits included) go at most every linger."""

from __future__ import annotations

import asyncio
import time

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


def trickle(session: str, deltas: int = DELTAS) -> list[InboundEvent]:
    ids = {"session_id": session, "turn_id": f"{session}-t"}
    return [
        TurnStarted(**ids, seq=0),  # type: ignore[arg-type]
        AttemptStarted(**ids, seq=1, provider="p", model="m"),  # type: ignore[arg-type]
        TextStart(**ids, seq=2, part_id="a"),  # type: ignore[arg-type]
        *(TextDelta(**ids, seq=3 + n, part_id="a", delta=f"{n} ") for n in range(deltas)),  # type: ignore[arg-type]
    ]


async def commits_for_a_trickle(
    redis: Redis,
    prefix: str,
    linger_ms: int | None,
    deltas: int = DELTAS,
    apart_s: float = 0.01,
    budget_ms: int = 20,
) -> tuple[int, float]:
    """Commits a worker makes for a trickle of events published `apart_s` apart once it is
    idle, and the seconds the publishing took."""
    settings = Settings(
        prefix=prefix,
        partitions=PARTITIONS,
        block_ms=1000,
        linger_ms=linger_ms,
        latency_budget_ms=budget_ms,
    )
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings) as worker:
        await until(lambda: owns_all(worker), "the worker to own every partition")
        await asyncio.sleep(0.3)  # idle: every owner in its blocking read
        before = worker.metrics.commits
        session = f"s-{linger_ms}-{budget_ms}"
        started = time.monotonic()
        for event in trickle(session, deltas):
            await producer.publish([event])
            await asyncio.sleep(apart_s)
        seconds = time.monotonic() - started
        await until(lambda: applied(redis, prefix, session, deltas), "the trickle committed")
        # Redis shows a commit's frames before the worker has taken its reply, which is when
        # the commit is counted: read the count once every owner is back to waiting.
        await until(lambda: all_waiting(worker), "every commit's reply taken")
        return worker.metrics.commits - before, seconds


async def all_waiting(worker: Worker) -> bool:
    return all(o.idle for pump in worker.pumps for o in pump.owners.values())


async def owns_all(worker: Worker) -> bool:
    owners = [o for pump in worker.pumps for o in pump.owners.values()]
    return len(owners) == PARTITIONS and not any(o.starting for o in owners)


async def applied(redis: Redis, prefix: str, session: str, deltas: int = DELTAS) -> bool:
    """Every delta of the trickle is a frame of its session."""
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    return sum(isinstance(f, AgentMessageChunk) for f in frames) == deltas


@pytest.mark.parametrize("linger_ms", [0, 500])
async def test_a_trickle_commits_in_fewer_rounds_with_a_linger(
    redis: Redis, prefix: str, linger_ms: int
) -> None:
    commits, _ = await commits_for_a_trickle(redis, prefix, linger_ms)
    if linger_ms:
        assert commits == 1, "ten entries within the linger: one batch"
    else:
        assert commits >= 3, "without a linger, the trickle takes a round every few entries"


async def test_while_entries_trickle_in_commits_go_at_most_every_linger(
    redis: Redis, prefix: str
) -> None:
    # 1,503 events published one by one, back to back (most of a second here). Committing as
    # soon as each read is folded, a pump commits a few entries at a time, as each commit's read
    # finds the ones that came meanwhile (338 commits when measured); pacing its rounds, commits
    # included, every 150 ms, it commits about once per linger while they come.
    commits, seconds = await commits_for_a_trickle(redis, prefix, 150, deltas=1500, apart_s=0)
    # A round is paced (150 ms after the last) unless the last read a load, a quarter of a batch
    # (`Pump.full`): a trickle faster than that per linger makes every paced round full, and the
    # round after it goes at once. So at most one paced round per linger, plus the first, plus
    # one unpaced round per full one, and at most 1,503 / 128 rounds can be full.
    paced = int(seconds / 0.150) + 1
    unpaced = 1503 // (Settings().batch_size // 4)
    assert 2 <= commits <= paced + unpaced + 2, (
        f"{commits} commits over {seconds:.2f} s paced at 150 ms"
    )


@pytest.mark.parametrize("budget_ms", [0, 1000])
async def test_without_a_set_linger_the_latency_budget_sets_it(
    redis: Redis, prefix: str, budget_ms: int
) -> None:
    # A budget of 1 s lets rounds linger about half a second: the ten entries, 10 ms apart,
    # commit as one batch. A budget of nothing leaves no linger at all.
    commits, _ = await commits_for_a_trickle(redis, prefix, None, budget_ms=budget_ms)
    if budget_ms:
        assert commits == 1, "ten entries within the budget's linger: one batch"
    else:
        assert commits >= 3, "no budget, no linger: a round every few entries"
