"""What `GET /v1/sessions/{id}/updates` streams: the session's frames from a cursor, every frame
waiting for the client in one chunk, until the client goes, or until an end it asked for.

`until_end` ends the stream after the first turn end (`turn_finished` or `agent_error`) of any
turn; `until_turn=T` after the end of turn T. A turn that ended before the request is not
waited for: its frames after the cursor are sent, up to its end, and the stream ends. A turn not
started yet (a frontend that subscribes before its producer starts) is waited for, live.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from redis.asyncio import Redis

from terminus.events.outbound import TURN_ENDINGS, SessionUpdate
from terminus.service.gateway.hub import (
    Delivery,
    Hub,
    SubscriberTooSlow,
    SubscriptionBroken,
    delivery_of,
)
from terminus.service.gateway.timeline import TurnArchived, load_turn
from terminus.service.keys import keys_for_session
from terminus.service.redis.replies import xrange
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES

Ends = Callable[[SessionUpdate], bool]


def ends_at(until_end: bool, until_turn: str | None) -> Ends | None:
    """Which frame ends the stream, if any."""
    if until_turn is not None:
        return lambda frame: isinstance(frame, TURN_ENDINGS) and frame.turn_id == until_turn
    if until_end:
        return lambda frame: isinstance(frame, TURN_ENDINGS)
    return None


async def session_events(
    hub: Hub,
    redis: Redis,
    settings: Settings,
    session: str,
    after: str | None,
    until_end: bool = False,
    until_turn: str | None = None,
) -> AsyncIterator[bytes]:
    """The session's frames as encoded SSE events."""
    ends = ends_at(until_end, until_turn)
    if until_turn is not None and await _has_ended(redis, settings, session, until_turn):
        for chunk in await _backlog(redis, settings, session, after, ends):
            yield chunk
        return
    try:
        async for batch in hub.subscribe_batches(session, after):
            kept, done = _until(batch, ends)
            yield b"".join(d.sse for d in kept)
            if done:
                return
    except SubscriberTooSlow:
        return  # the client resumes from the last id it received
    except SubscriptionBroken:
        return  # its stream cannot be read: the hub went on for the others


def _until(batch: Sequence[Delivery], ends: Ends | None) -> tuple[Sequence[Delivery], bool]:
    """The deliveries up to the first that ends the stream, and whether one did."""
    if ends is None:
        return batch, False
    end = next((n for n, d in enumerate(batch) if ends(d.frame)), None)
    return (batch, False) if end is None else (batch[: end + 1], True)


async def _has_ended(redis: Redis, settings: Settings, session: str, turn_id: str) -> bool:
    try:
        turn = await load_turn(redis, session, turn_id, settings.partitions, settings.prefix)
    except TurnArchived:
        return True
    return turn is not None and turn.state in FINAL_STATES


async def _backlog(
    redis: Redis, settings: Settings, session: str, after: str | None, ends: Ends | None
) -> list[bytes]:
    """The frames after `after` up to the end `ends` names (all that exist if none does)."""
    key = keys_for_session(session, settings.partitions, settings.prefix).session(session)
    low = "-" if after is None else f"({after}"
    kept, _ = _until([delivery_of(entry) for entry in await xrange(redis, key, low)], ends)
    return [b"".join(d.sse for d in kept)] if kept else []
