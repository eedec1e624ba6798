"""The subscriber SDK: a session's updates, in order, each exactly once, across disconnects
(DESIGN sections 4 and 7).

    source = GatewaySource("https://terminus.example", token)   # or RedisSource(redis)
    view = LiveSession()
    async with subscribe(session_id, cursor, source=source, until_turn=turn_id) as updates:
        async for update in updates:
            view.apply(update)             # drops the parts of discarded attempts
            render(view.text(turn_id))     # what the UI shows now
    save(update.cursor)                    # resume later from here: no gap, no duplicate

`subscribe` yields `Update`s: each frame of the session stream after `cursor` (exclusive; None:
from the first kept frame) with its cursor, oldest first, then live ones. When the connection
breaks (a network cut, a Redis or gateway restart, a gateway that ends the stream) it reconnects
by itself with exponential backoff, from the last cursor it yielded, so the consumer sees every
frame once. A worker crash needs nothing from the consumer: the pool commits each batch
atomically, so the session stream never holds a frame twice or loses one. A gateway's 429 is
waited out for its `Retry-After`. Session streams are capped (MAXLEN ~): a cursor older than the
oldest kept frame resumes at that frame. Leaving it in any way (the end of the `async with`
block, a `break`, an exception) releases its connection (service/sdk/subscription.py).

Errors (nothing else escapes but the consumer's own exceptions):
    SubscriberError
     +-- SubscriptionRefused   a final no (a 3xx, or a 4xx other than 429): `status`, `reason`
     |    +-- SubscriptionDenied   401/403, or Redis refused the credentials or the ACL
     +-- SourceUnavailable     still failing after `Backoff.give_up_after_s` (cause chained)
     +-- UnreadableFrame       a frame this SDK cannot decode, at `cursor`

Parts: `sdk.updates` (Update, errors, the `Source` port), `sdk.gateway_source` (the gateway
reader and its SSE parser), `sdk.redis_source` (XREAD on a Redis client), `sdk.live` (the live
view); this module re-exports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from terminus.events.outbound import TURN_ENDINGS
from terminus.service.sdk.gateway_source import GatewaySource
from terminus.service.sdk.live import LivePart, LiveSession, LiveTurn
from terminus.service.sdk.redis_source import RedisSource
from terminus.service.sdk.subscription import Subscription
from terminus.service.sdk.updates import (
    Interrupted,
    Source,
    SourceUnavailable,
    SubscriberError,
    SubscriptionDenied,
    SubscriptionRefused,
    UnreadableFrame,
    Update,
)

__all__ = [
    "Backoff",
    "GatewaySource",
    "Interrupted",
    "LivePart",
    "LiveSession",
    "LiveTurn",
    "RedisSource",
    "Source",
    "SourceUnavailable",
    "SubscriberError",
    "Subscription",
    "SubscriptionDenied",
    "SubscriptionRefused",
    "UnreadableFrame",
    "Update",
    "subscribe",
]


@dataclass(frozen=True)
class Backoff:
    """Delays between reconnects: doubling from `initial_s` up to `max_s`, with jitter; after
    `give_up_after_s` of failures in a row (None: never) `SourceUnavailable` is raised."""

    initial_s: float = 0.05
    max_s: float = 5.0
    give_up_after_s: float | None = None


def subscribe(
    session_id: str,
    cursor: str | None = None,
    *,
    source: Source,
    until_end: bool = False,
    until_turn: str | None = None,
    backoff: Backoff | None = None,
) -> Subscription:
    """The session's updates after `cursor`, then live ones, each once and in order, resuming by
    itself after any failure worth retrying. Forever, unless `until_end` (stop after the first
    `turn_finished` or `agent_error`) or `until_turn` (after that turn's one). Iterate it, or
    enter it first (`async with`): either way, leaving releases the connection."""
    updates = _updates(session_id, cursor, source, until_end, until_turn, backoff or Backoff())
    return Subscription(updates)


async def _updates(
    session_id: str,
    cursor: str | None,
    source: Source,
    until_end: bool,
    until_turn: str | None,
    backoff: Backoff,
) -> AsyncGenerator[Update, None]:
    retry = _Retry(backoff)
    last = cursor
    while True:
        try:
            async with contextlib.aclosing(source.read(session_id, last)) as updates:
                async for update in updates:
                    retry.reset()
                    last = update.cursor
                    yield update
                    if _ends(update, until_end, until_turn):
                        return
            await retry.wait(last, None)  # the source ended the stream: resume
        except Interrupted as exc:
            await retry.wait(last, exc)


def _ends(update: Update, until_end: bool, until_turn: str | None) -> bool:
    if not isinstance(update.frame, TURN_ENDINGS):
        return False
    return until_end or update.turn_id == until_turn


class _Retry:
    """Exponential backoff with equal jitter, reset by every update received."""

    def __init__(self, backoff: Backoff, rng: random.Random | None = None) -> None:
        self.backoff, self.rng = backoff, rng or random.Random()
        self.failures = 0
        self.since: float | None = None

    def reset(self) -> None:
        self.failures, self.since = 0, None

    async def wait(self, cursor: str | None, exc: Interrupted | None) -> None:
        now = time.monotonic()
        self.since = self.since if self.since is not None else now
        limit = self.backoff.give_up_after_s
        if limit is not None and now - self.since > limit:
            raise SourceUnavailable(cursor, now - self.since) from exc
        ceiling = min(self.backoff.max_s, self.backoff.initial_s * 2**self.failures)
        self.failures += 1
        delay = self.rng.uniform(ceiling / 2, ceiling)
        if exc is not None and exc.retry_after_s is not None:
            delay = max(delay, exc.retry_after_s)
        await asyncio.sleep(delay)
