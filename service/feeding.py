"""Publish a transcript file as one attempt of a turn, through the producer SDK.

Shared by `terminus publish` and the demo: the file is read exactly as `simulate` reads it
(`service.transcripts.read_attempt`, provider adapters included), so what the workers fold is
what `simulate` folds. A leading `attempt-started` in a normalized file supplies the attempt's
provider, model and strictness; the SDK numbers every event again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from events.adapters import AttemptContext
from events.inbound import AttemptStarted, InboundEvent
from service.producer import TurnPublisher
from service.transcripts import read_attempt


async def publish_attempt(
    turn: TurnPublisher,
    path: Path,
    provider: str,
    *,
    attempt: int,
    step: int = 1,
    chunk: int = 0,
    pace_s: float = 0.0,
) -> int:
    """Publish `path` as attempt `attempt` of `step`; returns how many events it held.

    With `chunk` > 0, events go out `chunk` at a time, `pace_s` apart, as a live stream would.
    Raises `service.transcripts.TranscriptError` for a bad file, before publishing anything.
    """
    ctx = AttemptContext(
        session_id=turn.session_id, turn_id=turn.turn_id, step=step, attempt=attempt,
        provider=provider,
    )  # fmt: skip
    events = [event for event, _ in read_attempt(path, ctx, provider, 0)]
    head = events[0] if events and isinstance(events[0], AttemptStarted) else None
    await turn.start_attempt(
        step=step,
        attempt=attempt,
        provider=head.provider if head else provider,
        model=head.model if head else "",
        strict=head.strict if head else True,
        contract=head.contract if head else None,
    )
    body = events[1:] if head else events
    for start in range(0, len(body), chunk or len(body) or 1):
        await turn.add(_piece(body, start, chunk))
        await turn.flush()
        if pace_s:
            await asyncio.sleep(pace_s)
    return len(events)


def _piece(events: list[InboundEvent], start: int, chunk: int) -> list[InboundEvent]:
    return events[start : start + chunk] if chunk else events[start:]
