"""`POST /v1/sessions/{session_id}/turns/{turn_id}/cancel`: a user's Stop (a session token) or an
operator's (an operator token). Only a live turn is cancelled: an unknown turn is 404 (so a
client cannot fill the dead letters with cancels of turns that never were), a final one 409."""

from __future__ import annotations

from typing import Final

import msgspec
from redis.asyncio import Redis

from terminus.service.fold.snapshots import SnapshotError
from terminus.service.gateway.timeline import TurnArchived, load_turn
from terminus.service.sdk.cancel import cancel_turn
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES

MAX_REASON: Final = 200


class CancelAnswer(msgspec.Struct, frozen=True):
    """What the gateway answers: its status, and the body's fields."""

    status: int
    body: dict[str, str]


async def request_cancel(
    redis: Redis, settings: Settings, session_id: str, turn_id: str, reason: str
) -> CancelAnswer:
    """Publish the cancel of a live turn; 404 for an unknown turn, 409 for a final one."""
    try:
        turn = await load_turn(redis, session_id, turn_id, settings.partitions, settings.prefix)
    except (TurnArchived, SnapshotError, msgspec.MsgspecError):
        turn = None
    if turn is None:
        return CancelAnswer(404, {"error": "no such live turn in this session"})
    if turn.state in FINAL_STATES:
        return CancelAnswer(409, {"error": "the turn has ended", "state": turn.state.value})
    entry_id = await cancel_turn(
        redis,
        session_id,
        turn_id,
        partitions=settings.partitions,
        prefix=settings.prefix,
        reason=reason[:MAX_REASON] or "cancelled",
    )
    return CancelAnswer(202, {"cancel": "requested", "entry_id": entry_id})
