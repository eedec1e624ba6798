"""What `subscribe()` returns: an async iterator of updates that is also an async context manager,
and that closes cleanly however its consumer leaves it.

    async with subscribe(session_id, source=source) as updates:
        async for update in updates: ...

A bare async generator cannot promise that. After `async for u in updates: break` it stays
suspended until the garbage collector or the loop's shutdown closes it, and at shutdown asyncio
closes every async generator still alive at once: the subscriber's, the source's it reads and
httpx's under those, side by side, so the outer one's close meets an inner one already being
closed ("RuntimeError: aclose(): asynchronous generator is already running", issue 31).

So the generators run in a task of their own, which the consumer drives one update at a time (no
read ahead: the source is asked for the next update only when the consumer asks). Leaving, in any
way, cancels that task: the end of an `async with` block and `aclose()` wait for it; a handle
dropped after a `break` cancels it as it goes; `asyncio.run` cancels it when the script ends.
Cancelled, the task's frames close the generators innermost first, as nested `async with` blocks
do, releasing the connection, and no generator is left for the loop to close.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import TypeAlias

from terminus.service.sdk.updates import Update

# What the pump hands over: an update, the error that ended the updates, or None once its task
# is done (the updates ended, or the task was cancelled).
Answer: TypeAlias = Update | Exception | None


class Subscription:
    """A session's updates, one at a time; `aclose()` (or the end of an `async with` block)
    releases the connection, and so does dropping it, so a `break` leaves nothing behind."""

    def __init__(self, updates: AsyncGenerator[Update, None]) -> None:
        self._updates: AsyncGenerator[Update, None] | None = updates
        self._task: asyncio.Task[None] | None = None
        self._asks: asyncio.Queue[None] = asyncio.Queue()
        self._answers: asyncio.Queue[Answer] = asyncio.Queue()
        self._asked = False  # an ask is out: a consumer cancelled while waiting left it there
        self._over = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Update:
        if self._over:
            raise StopAsyncIteration
        task = self._task or self._start()
        if not self._asked:
            self._asks.put_nowait(None)
            self._asked = True
        answer = await self._answers.get()
        self._asked = False
        if isinstance(answer, Update):
            return answer
        self._over = True
        if answer is None:
            if task.cancelled():  # by someone else than `aclose`, which set `_over` first
                raise asyncio.CancelledError
            raise StopAsyncIteration
        raise answer

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop reading and release the connection; iterating again ends at once."""
        self._over = True
        if self._task is None:
            updates, self._updates = self._updates, None
            if updates is not None:
                await updates.aclose()
            return
        self._task.cancel()
        await asyncio.wait([self._task])

    def __del__(self) -> None:
        task = self._task
        if task is not None and not task.done():
            # The loop may be closed already (a handle kept past asyncio.run): nothing runs then.
            with contextlib.suppress(RuntimeError):
                task.cancel()

    def _start(self) -> asyncio.Task[None]:
        assert self._updates is not None
        updates, self._updates = self._updates, None
        task = asyncio.create_task(_pump(updates, self._asks, self._answers), name="subscription")
        answers = self._answers
        task.add_done_callback(lambda done: _finished(done, answers))
        self._task = task
        return task


async def _pump(
    updates: AsyncGenerator[Update, None],
    asks: asyncio.Queue[None],
    answers: asyncio.Queue[Answer],
) -> None:
    """Read one update per ask, until the updates end or fail; closes them however it ends."""
    async with contextlib.aclosing(updates):
        while True:
            await asks.get()
            try:
                answers.put_nowait(await anext(updates))
            except StopAsyncIteration:
                return
            except Exception as exc:  # the consumer's to handle, raised by its `__anext__`
                answers.put_nowait(exc)
                return


def _finished(task: asyncio.Task[None], answers: asyncio.Queue[Answer]) -> None:
    """Tell a waiting consumer that the task is done; mark a failure of its closing as seen (the
    consumer has left: asyncio would print it as never retrieved)."""
    if not task.cancelled():
        task.exception()
    answers.put_nowait(None)
