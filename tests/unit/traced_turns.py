"""Turns told from recorded provider transcripts, for the span tests: each attempt file through
its provider's adapter (as `terminus simulate` reads it), numbered as a producer would, every
entry one log millisecond after the last."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from terminus.events.adapters import CONTRACTS, AttemptContext
from terminus.events.inbound import (
    AttemptStarted,
    InboundEvent,
    StreamClosed,
    StreamError,
    ToolCall,
    ToolResult,
    TurnCancelled,
    TurnStarted,
)
from terminus.service.cli.transcripts import read_attempt
from terminus.service.traces.records import Record, fold_turn

FIXTURES: Final = Path(__file__).parent.parent / "fixtures" / "provider-streams" / "anthropic"
SESSION: Final = "sess-traces"
TURN: Final = "turn-traces"
T0: Final = 1_760_000_000_000
CUT: Final = "text-basic-ping-sdk-python.sse"  # text, then no message_stop
TEXT: Final = "text-recorded-fantasy.sse"
OVERLOADED: Final = "error-event-overloaded-sdk-python.sse"
NO_CREDIT: Final = "http-400-credit-balance-too-low-claude-code-issue66314.json"
TOOL_USE: Final = "tool-use-recorded-fantasy.sse"
MODEL: Final = "claude-sonnet-4-5"


class Log:
    """A turn's inbound events in publishing order."""

    def __init__(self, traceparent: str | None = None, max_attempts: int | None = None) -> None:
        start = TurnStarted(
            session_id=SESSION,
            turn_id=TURN,
            seq=0,
            max_attempts=max_attempts,
            traceparent=traceparent,
        )
        self.events: list[InboundEvent] = [start]
        self.step, self.attempt, self.seq = 1, 0, 1

    def attempt_file(self, name: str, *, next_step: bool = False, keep: int | None = None) -> None:
        """One attempt from a recorded transcript, the next of its step (or the first of the
        next step); with `keep`, only its first `keep` events and no EOF (still streaming)."""
        self.step, self.attempt = (self.step + 1, 1) if next_step else (self.step, self.attempt + 1)
        first = self.seq if (self.step, self.attempt) == (1, 1) else 0
        step, attempt = self.step, self.attempt
        started = AttemptStarted(
            session_id=SESSION,
            turn_id=TURN,
            step=step,
            attempt=attempt,
            seq=first,
            provider="anthropic",
            model=MODEL,
            contract=CONTRACTS["anthropic"],
        )
        ctx = AttemptContext(
            session_id=SESSION, turn_id=TURN, step=step, attempt=attempt, provider="anthropic"
        )
        events = [e for e, _ in read_attempt(FIXTURES / name, ctx, "anthropic", first)][:keep]
        self.events += [started, *events]
        self.seq = events[-1].seq + 1
        if keep is None and not isinstance(events[-1], StreamError | StreamClosed):
            self.events.append(self._next(StreamClosed))  # the producer's EOF

    def tool_results(self) -> None:
        """A result for every tool call of the current attempt."""
        calls = [e for e in self.events if isinstance(e, ToolCall) and e.attempt == self.attempt]
        for call in calls:
            self.events.append(self._next(ToolResult, tool_call_id=call.tool_call_id, output="ok"))

    def cancel(self) -> None:
        self.events.append(self._next(TurnCancelled, reason="user"))

    def _next(self, cls: type[InboundEvent], **fields: object) -> InboundEvent:
        ids = {"session_id": SESSION, "turn_id": TURN, "step": self.step, "attempt": self.attempt}
        event = cls(**ids, seq=self.seq, **fields)  # type: ignore[arg-type]
        self.seq += 1
        return event

    def timed(self) -> list[tuple[int, InboundEvent]]:
        return [(T0 + i, event) for i, event in enumerate(self.events)]

    def records(self) -> list[Record]:
        records = fold_turn(self.timed())
        assert records is not None, "the turn is not final"
        return records
