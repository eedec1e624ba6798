"""The inspector's reads (service/gateway/timeline.py) over what a real worker committed to
Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Final

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.codec import encode_json
from terminus.events.inbound import FinishStep, TextDelta, TextEnd, TextStart, Usage
from terminus.service.gateway.timeline import SCAN_PAGE, find_session, recent_turns, timeline
from terminus.service.keys import keys_for_session
from terminus.service.sdk.producer import Producer, TurnPublisher
from terminus.service.settings import Settings
from terminus.statemachines.outputs import Transition
from terminus.statemachines.states import TurnState

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

PARTITIONS: Final = 4


@pytest.fixture
async def producer(redis: Redis, prefix: str) -> AsyncIterator[Producer]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    async with running_worker(redis, settings):
        yield Producer(redis, partitions=PARTITIONS, prefix=prefix)


async def text_attempt(turn: TurnPublisher, attempt: int, words: list[str], proof: bool) -> None:
    await turn.start_attempt(attempt=attempt, provider="p", model="m")
    await turn.emit(TextStart, part_id=f"a{attempt}")
    for word in words:
        await turn.emit(TextDelta, part_id=f"a{attempt}", delta=word)
    await turn.emit(TextEnd, part_id=f"a{attempt}")
    if proof:
        usage = Usage(input_tokens=7, output_tokens=len(words))
        await turn.emit(FinishStep, finish_reason="stop", raw_finish_reason="end_turn", usage=usage)
    await turn.close_attempt()


async def retried_turn(producer: Producer, session: str, turn_id: str) -> None:
    """Attempt 1 is cut (no terminal proof), attempt 2 finishes."""
    turn = producer.turn(session, turn_id)
    await turn.start()
    await text_attempt(turn, 1, ["lost ", "words"], proof=False)
    # As a real producer does, attempt 2 starts once the retry is scheduled: started before, its
    # entries could be older than the `retrying` frame by a millisecond, out of the story's order.
    await reached(producer.redis, producer.prefix, session, turn_id, TurnState.RETRYING)
    await text_attempt(turn, 2, ["kept ", "words ", "here"], proof=True)


async def reached(redis: Redis, prefix: str, session: str, turn_id: str, state: TurnState) -> None:
    deadline = time.monotonic() + 20
    while True:
        found = await timeline(redis, session, turn_id, PARTITIONS, prefix)
        if found is not None and found.turn.state is state:
            return
        assert time.monotonic() < deadline, f"the turn never reached {state}"
        await asyncio.sleep(0.02)


async def settled(redis: Redis, prefix: str, session: str, turn_id: str) -> None:
    await reached(redis, prefix, session, turn_id, TurnState.FINISHED)


async def test_a_retried_turn_shows_every_state_change_the_discard_and_the_retry(
    redis: Redis, prefix: str, producer: Producer
) -> None:
    await retried_turn(producer, "s-1", "t-1")
    await settled(redis, prefix, "s-1", "t-1")
    found = await timeline(redis, "s-1", "t-1", PARTITIONS, prefix)
    assert found is not None
    assert found.complete
    states = [i.detail["dest"] for i in found.items if i.kind == "transition"]
    path = ["streaming", "truncated", "retrying", "streaming", "awaiting_terminal", "finished"]
    assert states == path
    kinds = [i.kind for i in found.items if i.kind != "transition"]
    assert kinds == ["attempt_discarded", "retrying", "message_committed", "turn_finished"]
    story = [i.detail.get("trigger", i.kind) for i in found.items]
    first_attempt = ["start_attempt", "truncate", "schedule_retry", "attempt_discarded", "retrying"]
    second_attempt = ["start_attempt", "finish_step", "prove", "message_committed", "turn_finished"]
    assert story == [*first_attempt, *second_attempt]
    discarded = next(i for i in found.items if i.kind == "attempt_discarded")
    assert (discarded.attempt, discarded.detail["part_ids"]) == (1, ["a1"])
    assert found.chunks == {"1.1": 2, "1.2": 3}
    assert [i.at_ms for i in found.items] == sorted(i.at_ms for i in found.items)
    assert [h.outcome for h in found.turn.history] == ["truncated", "finished"]


async def test_a_turn_is_found_by_its_id_alone_and_only_in_its_own_session(
    redis: Redis, prefix: str, producer: Producer
) -> None:
    await retried_turn(producer, "s-2", "t-2")
    await settled(redis, prefix, "s-2", "t-2")
    assert await find_session(redis, "t-2", PARTITIONS, prefix) == "s-2"
    assert await find_session(redis, "t-none", PARTITIONS, prefix) is None
    assert await timeline(redis, "s-other", "t-2", PARTITIONS, prefix) is None


async def test_recent_turns_lists_each_turn_once_with_its_latest_state_newest_first(
    redis: Redis, prefix: str, producer: Producer
) -> None:
    for n in range(3):
        await retried_turn(producer, f"s-{n}", f"t-{n}")
        await settled(redis, prefix, f"s-{n}", f"t-{n}")
    listed = await recent_turns(redis, PARTITIONS, prefix)
    assert [s.turn_id for s in listed] == ["t-2", "t-1", "t-0"]
    assert {s.state for s in listed} == {"finished"}
    assert [s.turn_id for s in await recent_turns(redis, PARTITIONS, prefix, limit=1)] == ["t-2"]


async def test_a_turn_whose_start_is_many_pages_back_is_still_found_whole(
    redis: Redis, prefix: str, producer: Producer
) -> None:
    await retried_turn(producer, "s-3", "t-3")
    await settled(redis, prefix, "s-3", "t-3")
    found = await timeline(redis, "s-3", "t-3", PARTITIONS, prefix)
    assert found is not None
    key = keys_for_session("s-3", PARTITIONS, prefix).transitions
    filler = encode_json(
        Transition(
            session_id="x", turn_id="x", step=1, attempt=1, source="a", dest="b", trigger="c"
        )
    )
    async with redis.pipeline(transaction=False) as pipe:
        for _ in range(SCAN_PAGE * 2 + 5):
            pipe.xadd(key, {b"e": filler})
        await pipe.execute()
    again = await timeline(redis, "s-3", "t-3", PARTITIONS, prefix)
    assert again is not None
    assert again.complete
    assert [i for i in again.items if i.kind == "transition"] == [
        i for i in found.items if i.kind == "transition"
    ]
