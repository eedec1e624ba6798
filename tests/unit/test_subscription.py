"""`subscribe()`'s handle over a scripted source: leaving it in any way closes the source's reader
and leaves no task; it reads no update ahead of its consumer; a consumer's `anext` cancelled by
its own timeout loses nothing; a source's error reaches the consumer and ends the iteration."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest

from terminus import Subscription, subscribe
from terminus.events.outbound import AgentMessageChunk
from terminus.service.sdk.updates import SubscriptionDenied, Update


class Scripted:
    """A source of `n` updates, each after `delay` seconds, then silence (a live stream with
    nothing new), or `error` instead of the silence; counts its reads and closes."""

    def __init__(self, n: int, delay: float = 0.0, error: Exception | None = None) -> None:
        self.n, self.delay, self.error = n, delay, error
        self.reads = self.closed = 0

    async def read(self, session_id: str, after: str | None) -> AsyncGenerator[Update, None]:
        try:
            for i in range(self.n):
                await asyncio.sleep(self.delay)
                self.reads += 1
                frame = AgentMessageChunk(
                    session_id=session_id, turn_id="t", step=1, attempt=1, part_id="p", delta=str(i)
                )
                yield Update(f"{i + 1}-0", frame)
            if self.error is not None:
                raise self.error
            await asyncio.Event().wait()
        finally:
            self.closed += 1


def others() -> set[asyncio.Task[object]]:
    return asyncio.all_tasks() - {asyncio.current_task()}


async def settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_end_of_an_async_with_block_closes_the_reader() -> None:
    source = Scripted(3)
    async with subscribe("s", source=source) as updates:
        assert isinstance(updates, Subscription)
        async for update in updates:
            assert update.kind == "agent_message_chunk"
            break
        assert source.closed == 0
    assert source.closed == 1
    assert not others()


async def test_a_break_out_of_a_plain_loop_closes_the_reader() -> None:
    source = Scripted(3)
    async for _ in subscribe("s", source=source):
        break
    await settled()
    assert source.closed == 1
    assert not others()


async def test_nothing_is_read_ahead_of_the_consumer() -> None:
    source = Scripted(5)
    async with subscribe("s", source=source) as updates:
        first = await anext(updates)
        await settled()
        assert (first.cursor, source.reads) == ("1-0", 1)
        await anext(updates)
        await settled()
        assert source.reads == 2


async def test_a_consumers_timeout_loses_no_update() -> None:
    source = Scripted(2, delay=0.2)
    async with subscribe("s", source=source) as updates:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(updates), 0.01)
        assert (await anext(updates)).cursor == "1-0"
        assert (await anext(updates)).cursor == "2-0"


async def test_an_error_of_the_source_reaches_the_consumer_and_ends_it() -> None:
    source = Scripted(1, error=SubscriptionDenied(403, "no"))
    updates = subscribe("s", source=source)
    assert (await anext(updates)).cursor == "1-0"
    with pytest.raises(SubscriptionDenied):
        await anext(updates)
    with pytest.raises(StopAsyncIteration):
        await anext(updates)
    await settled()
    assert source.closed == 1
    assert not others()


async def test_closed_before_it_is_read_it_reads_nothing() -> None:
    source = Scripted(1)
    updates = subscribe("s", source=source)
    await updates.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(updates)
    assert source.reads == 0
