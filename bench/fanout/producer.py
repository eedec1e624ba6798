"""The fan-out benchmark's producer: endless streaming turns in every session at a steady rate.

Events go round robin over the sessions, so each session streams `rate / sessions` events/s,
as a model streams tokens. A turn is `turn-started`, `attempt-started` (Gemini contract, whose
`finish-step` is the terminal proof), `text-start`, `deltas` text deltas, `text-end` and
`finish-step`: every delta becomes one `agent_message_chunk` frame, and the end of a turn a
`message_committed` and a `turn_finished` frame. Each delta carries `~<µs>~`, the
`time.monotonic()` of its publish call in microseconds, which survives into its frame.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Final, NamedTuple

from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.sdk.producer import Producer

TICK_S: Final = 0.001
PART: Final = "txt-0"
FIXED: Final = 5  # events of a turn besides its deltas


class Turns:
    """The next events of every session's current turn, round robin over the sessions."""

    def __init__(self, sessions: Sequence[str], deltas: int) -> None:
        self.sessions, self.deltas = list(sessions), deltas
        self.position = [0] * len(sessions)
        self.turns = [0] * len(sessions)
        self.following = 0

    def take(self, count: int, now_us: int) -> list[InboundEvent]:
        events: list[InboundEvent] = []
        for _ in range(count):
            k = self.following
            self.following = (k + 1) % len(self.sessions)
            events.append(self.event(k, now_us))
        return events

    def event(self, k: int, now_us: int) -> InboundEvent:
        seq = self.position[k]
        self.position[k] = (seq + 1) % (self.deltas + FIXED)
        if seq == 0:
            self.turns[k] += 1
        s = self.sessions[k]
        t = f"{s}-t{self.turns[k]}"
        last_delta = self.deltas + 2
        if seq == 0:
            return TurnStarted(session_id=s, turn_id=t, seq=seq)
        if seq == 1:
            return AttemptStarted(session_id=s, turn_id=t, seq=seq, contract="gemini")
        if seq == 2:
            return TextStart(session_id=s, turn_id=t, seq=seq, part_id=PART)
        if seq <= last_delta:
            delta = f" token ~{now_us}~"
            return TextDelta(session_id=s, turn_id=t, seq=seq, part_id=PART, delta=delta)
        if seq == last_delta + 1:
            return TextEnd(session_id=s, turn_id=t, seq=seq, part_id=PART)
        usage = Usage(output_tokens=self.deltas)
        return FinishStep(session_id=s, turn_id=t, seq=seq, finish_reason="stop", usage=usage)


class Paced(NamedTuple):
    """Events published, and the monotonic times of the first and the last publish."""

    events: int
    start: float
    end: float


async def paced(
    producer: Producer, turns: Turns, rate: float, seconds: float, tails: dict[str, bytes]
) -> Paced:
    """Publish `rate * seconds` events at `rate` events/s, in the bursts due every tick; the
    last entry id of each inbound stream goes into `tails`."""
    total, sent = max(1, int(rate * seconds)), 0
    start = time.monotonic()
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        if due > sent:
            now = time.monotonic()
            events = turns.take(due - sent, int(now * 1e6))
            ids = await producer.publish(events)
            tails.update(
                zip((producer.inbound_key(e.session_id) for e in events), ids, strict=True)
            )
            sent = due
        await asyncio.sleep(TICK_S)
    return Paced(sent, start, time.monotonic())
