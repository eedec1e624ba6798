"""Publish transcript files as attempts of a turn, through the producer SDK.

Shared by `terminus publish` and the demo: a file is read exactly as `simulate` reads it
(`terminus.service.cli.transcripts.read_attempt`, provider adapters included), so what the workers
fold is what `simulate` folds. A leading `attempt-started` in a normalized file supplies the
attempt's provider, model, contract and strictness; `TurnPublisher.add` numbers the events
that follow it as the attempt's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from terminus.events.adapters import AttemptContext
from terminus.events.inbound import AttemptStarted, InboundEvent
from terminus.service.cli.transcripts import read_attempt
from terminus.service.sdk.producer import TurnPublisher
from terminus.service.sdk.runner import Attempt


class PreparedAttempt(NamedTuple):
    """A file read and checked: its own `attempt-started`, if any, and the events after it."""

    head: AttemptStarted | None
    body: list[InboundEvent]


def prepare_attempt(
    path: Path, provider: str, session_id: str, turn_id: str, *, attempt: int, step: int = 1
) -> PreparedAttempt:
    """Read `path`; raises `terminus.service.cli.transcripts.TranscriptError` for a bad file."""
    ctx = AttemptContext(
        session_id=session_id, turn_id=turn_id, step=step, attempt=attempt, provider=provider
    )
    events = [event for event, _ in read_attempt(path, ctx, provider, 0)]
    if events and isinstance(events[0], AttemptStarted):
        return PreparedAttempt(events[0], events[1:])
    return PreparedAttempt(None, events)


async def publish_prepared(
    turn: TurnPublisher,
    prepared: PreparedAttempt,
    provider: str,
    *,
    attempt: int,
    step: int = 1,
    chunk: int = 0,
    pace_s: float = 0.0,
) -> None:
    """Start the attempt and publish its events; with `chunk` > 0, `chunk` at a time, `pace_s`
    apart, as a live stream would arrive."""
    head, body = prepared
    await turn.start_attempt(
        step=step,
        attempt=attempt,
        provider=head.provider if head else provider,
        model=head.model if head else "",
        strict=head.strict if head else True,
        contract=head.contract if head else None,
        ts_ms=head.ts_ms if head else None,
    )
    size = chunk or len(body) or 1
    for start in range(0, len(body), size):
        await turn.add(body[start : start + size])
        await turn.flush()
        if pace_s:
            await asyncio.sleep(pace_s)


async def publish_attempt(
    turn: TurnPublisher,
    path: Path,
    provider: str,
    *,
    attempt: int,
    step: int = 1,
    chunk: int = 0,
    pace_s: float = 0.0,
) -> None:
    """Read `path` and publish it as attempt `attempt` of `step`."""
    prepared = prepare_attempt(
        path, provider, turn.session_id, turn.turn_id, attempt=attempt, step=step
    )
    await publish_prepared(
        turn, prepared, provider, attempt=attempt, step=step, chunk=chunk, pace_s=pace_s
    )


@dataclass
class TranscriptCall:
    """A provider call for `TurnRunner` that answers attempt n with the n-th recorded file (the
    last one again if the turn asks for more), `chunk` events at a time, `pace_s` apart."""

    provider: str
    files: Sequence[Path]
    model: str = ""
    chunk: int = 0
    pace_s: float = 0.0

    async def __call__(self, attempt: Attempt) -> None:
        path = self.files[min(attempt.number, len(self.files)) - 1]
        publisher = attempt.publisher
        _, body = prepare_attempt(
            path,
            self.provider,
            publisher.session_id,
            publisher.turn_id,
            attempt=attempt.number,
            step=attempt.step,
        )
        size = self.chunk or len(body) or 1
        for start in range(0, len(body), size):
            await attempt.add(body[start : start + size])
            if self.pace_s:
                await asyncio.sleep(self.pace_s)
