"""Cancel a turn from outside its producer: a user's Stop, an operator's `terminus cancel`.

The cancel is an entry of the turn's inbound log like any other, so the workers apply it in one
fenced commit and a worker killed around it neither loses it nor applies it twice. It stands
outside the producer's numbering (`external`): the workers apply it wherever the live turn is,
discard the open attempt's parts, tell the session (`turn_finished`, `cancelled`) and the producer
(`turn_concluded`, `cancelled`), whose runner then stops its provider request.
"""

from __future__ import annotations

from redis.asyncio import Redis

from terminus.events.inbound import TurnCancelled
from terminus.service.keys import DEFAULT_PREFIX
from terminus.service.sdk.producer import Producer


async def cancel_turn(
    redis: Redis,
    session_id: str,
    turn_id: str,
    *,
    partitions: int | None = None,
    prefix: str = DEFAULT_PREFIX,
    reason: str = "cancelled",
    ts_ms: int | None = None,
) -> str:
    """Append the cancel to the turn's inbound log; returns its entry id. `partitions` None:
    the deployment's recorded count (service/shape.py)."""
    producer = Producer(redis, partitions=partitions, prefix=prefix)
    cancel = TurnCancelled(
        session_id=session_id,
        turn_id=turn_id,
        step=1,  # the event's position means nothing when it is external
        attempt=1,
        seq=0,
        ts_ms=producer.now_ms() if ts_ms is None else ts_ms,
        reason=reason,
        external=True,
    )
    [entry_id] = await producer.publish([cancel])
    return entry_id.decode()
