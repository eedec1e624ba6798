"""One poison entry among a turn's events: it alone is dead-lettered, the turn's answer is whole.

Issue 15, defect 1: an entry whose bytes made the decoder raise something other than a codec error
(invalid UTF-8 inside a JSON string, nesting past the recursion limit) escaped the decoder, failed
the pump's round and left the entries read in that round behind while the folds had moved: a turn
published as a0-a4, b0-b4, c0-c4 around such entries was persisted as "a0 a1 a2 a3 a4 c1 c2 c3 c4".
An integer out of range decoded, then broke every commit of its batch until the innocent entries
were dead-lettered as "delivered 6 times".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Final, cast

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.codec import decode_message
from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.keys import keys_for_session
from terminus.service.redis.replies import StreamEntry
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from tests.support.faults.malformed import Junk, check_junk, deep_nesting, huge_integer, not_utf8

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

PARTITIONS: Final = 4


@pytest.fixture
async def worker(redis: Redis, prefix: str) -> AsyncIterator[None]:
    async with running_worker(redis, Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)):
        yield


async def publish_around(
    redis: Redis, producer: Producer, session: str, poison: list[Junk]
) -> None:
    """A turn of three runs of five deltas, with one poison entry after each of the first two
    runs, all in the session's inbound log in this order."""
    sid, tid = session, "t"
    inbound = producer.inbound_key(session)
    await producer.publish(
        [
            TurnStarted(session_id=sid, turn_id=tid, seq=0),
            AttemptStarted(session_id=sid, turn_id=tid, seq=1, contract="ai-sdk"),
            TextStart(session_id=sid, turn_id=tid, seq=2, part_id="p"),
        ]
    )
    seq = 3
    for run, letter in enumerate("abc"):
        await producer.publish(
            TextDelta(session_id=sid, turn_id=tid, seq=seq + n, part_id="p", delta=f"{letter}{n} ")
            for n in range(5)
        )
        seq += 5
        if run < len(poison):
            await redis.xadd(inbound, cast("dict[Any, Any]", poison[run].fields))
    usage = Usage(output_tokens=15)
    await producer.publish(
        [
            TextEnd(session_id=sid, turn_id=tid, seq=seq, part_id="p"),
            FinishStep(
                session_id=sid,
                turn_id=tid,
                seq=seq + 1,
                usage=usage,
                finish_reason="stop",
                raw_finish_reason="end_turn",
            ),
        ]
    )


async def message_of(redis: Redis, prefix: str, session: str) -> bytes:
    keys = keys_for_session(session, PARTITIONS, prefix)
    deadline = time.monotonic() + 20
    while (found := await redis.hget(keys.messages(session), "msg-t")) is None:
        assert time.monotonic() < deadline, "the turn was never persisted"
        await asyncio.sleep(0.05)
    return cast(bytes, found)


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize(
    "poison",
    [
        pytest.param([not_utf8(1), not_utf8(2)], id="not-utf8"),
        pytest.param([deep_nesting(1), deep_nesting(2)], id="deep-nesting"),
        pytest.param([huge_integer(1), huge_integer(2)], id="integer-out-of-range"),
    ],
)
async def test_a_poison_entry_is_dead_lettered_alone_and_the_answer_is_whole(
    redis: Redis, prefix: str, poison: list[Junk]
) -> None:
    session = "poisoned"
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await publish_around(redis, producer, session, poison)
    message = decode_message(await message_of(redis, prefix, session))
    text = "".join(getattr(part, "text", "") for part in message.parts)
    assert text == "".join(f"{letter}{n} " for letter in "abc" for n in range(5))
    assert message.finish_reason == "stop"
    keys = keys_for_session(session, PARTITIONS, prefix)
    rows = cast("list[StreamEntry]", await redis.xrange(keys.dead))
    dead = [fields for _, fields in rows]
    assert len(dead) == len(poison)
    for found, item in zip(dead, poison, strict=True):
        check_junk(found, item)
    assert all(b"delivered" not in found[b"reason"] for found in dead)
