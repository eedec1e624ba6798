"""Builders of inbound event sequences for the core's unit tests, numbered as a producer would.

`Script` keeps seq contiguous within each (step, attempt): the turn opens with `turn-started` at
seq 0 and the first `attempt-started` at seq 1; every later attempt starts again at seq 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, TypeVar

import msgspec

from terminus.events.inbound import (
    AttemptStalled,
    AttemptStarted,
    Contract,
    FinishReason,
    FinishStep,
    InboundEvent,
    ProviderTerminal,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StreamClosed,
    StreamError,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolError,
    ToolInputDelta,
    ToolInputStart,
    ToolResult,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
    Usage,
)
from terminus.events.outbound import SessionUpdate
from terminus.statemachines.config import DEFAULT_CONFIG, CoreConfig
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

SESSION: Final = "sess-1"
TURN: Final = "turn-1"

E = TypeVar("E", bound=InboundEvent)
F = TypeVar("F", bound=SessionUpdate)

# The provider's own end marker that proves an attempt under each strict contract.
STRICT_TERMINAL: Final[dict[str, str]] = {
    "anthropic-messages": "message_stop",
    "openai-chat": "[DONE]",
    "openai-responses": "response.completed",
}
# (contract, strict) pairs under which a genuine finish-step alone is the proof.
FINISH_PROVES: Final[frozenset[tuple[str, bool]]] = frozenset(
    (
        ("anthropic-messages", False),
        ("openai-chat", False),
        ("gemini", True),
        ("gemini", False),
        ("ai-sdk", True),
        ("ai-sdk", False),
    )
)
CONTRACTS: Final[tuple[tuple[Contract, bool], ...]] = (
    ("anthropic-messages", True),
    ("anthropic-messages", False),
    ("openai-chat", True),
    ("openai-chat", False),
    ("openai-responses", True),
    ("openai-responses", False),
    ("gemini", True),
    ("gemini", False),
    ("ai-sdk", True),
    ("ai-sdk", False),
)

OVERLOADED_BODY: Final = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
}
AUTH_BODY: Final = {
    "type": "error",
    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
}
OVERFLOW_BODY: Final = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208310 tokens > 200000 maximum",
    },
}


class Script:
    """The inbound events of one turn in publishing order, built call by call."""

    def __init__(
        self,
        *,
        contract: Contract = "ai-sdk",
        strict: bool = True,
        max_attempts: int | None = None,
        turn_id: str = TURN,
        session_id: str = SESSION,
        ts_ms: int = 0,
    ) -> None:
        self.turn_id, self.session_id, self.ts_ms = turn_id, session_id, ts_ms
        self.step, self.attempt, self.next_seq = 1, 1, 0
        self.contract, self.strict = contract, strict
        self.events: list[InboundEvent] = []
        self.emit(TurnStarted, max_attempts=max_attempts)
        self.emit(
            AttemptStarted, provider="anthropic", model="m-1", contract=contract, strict=strict
        )

    def emit(self, cls: type[E], **fields: Any) -> E:
        """Append one event of the current attempt at the next seq."""
        fields.setdefault("ts_ms", self.ts_ms)
        event = cls(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=self.step,
            attempt=self.attempt,
            seq=self.next_seq,
            **fields,
        )
        self.next_seq += 1
        self.events.append(event)
        return event

    def next_attempt(self, *, contract: Contract | None = None, strict: bool | None = None) -> None:
        """Start the next attempt of the current step, at seq 0."""
        self._start(self.step, self.attempt + 1, contract, strict)

    def next_step(self, *, contract: Contract | None = None, strict: bool | None = None) -> None:
        """Start attempt 1 of the next step, at seq 0."""
        self._start(self.step + 1, 1, contract, strict)

    def _start(
        self, step: int, attempt: int, contract: Contract | None, strict: bool | None
    ) -> None:
        self.step, self.attempt, self.next_seq = step, attempt, 0
        self.contract = self.contract if contract is None else contract
        self.strict = self.strict if strict is None else strict
        self.emit(
            AttemptStarted,
            provider="anthropic",
            model="m-1",
            contract=self.contract,
            strict=self.strict,
        )

    def text(self, part_id: str, *deltas: str) -> None:
        self.emit(TextStart, part_id=part_id)
        for delta in deltas:
            self.emit(TextDelta, part_id=part_id, delta=delta)
        self.emit(TextEnd, part_id=part_id)

    def reasoning(self, part_id: str, *deltas: str, signature: str | None = None) -> None:
        self.emit(ReasoningStart, part_id=part_id)
        for delta in deltas:
            self.emit(ReasoningDelta, part_id=part_id, delta=delta)
        self.emit(ReasoningEnd, part_id=part_id, signature=signature)

    def tool_input(self, call_id: str, name: str = "search", delta: str = '{"q":') -> None:
        self.emit(ToolInputStart, tool_call_id=call_id, tool_name=name)
        self.emit(ToolInputDelta, tool_call_id=call_id, tool_name=name, delta=delta)

    def tool_call(self, call_id: str, name: str = "search", **arguments: Any) -> None:
        self.emit(ToolCall, tool_call_id=call_id, tool_name=name, input=dict(arguments))

    def tool_result(self, call_id: str, output: str = "ok") -> None:
        self.emit(ToolResult, tool_call_id=call_id, output=output)

    def tool_error(self, call_id: str, error: str = "boom") -> None:
        self.emit(ToolError, tool_call_id=call_id, error=error)

    def finish(
        self, reason: FinishReason = "stop", raw: str | None = "end_turn", output_tokens: int = 7
    ) -> None:
        usage = Usage(input_tokens=11, output_tokens=output_tokens)
        self.emit(FinishStep, finish_reason=reason, raw_finish_reason=raw, usage=usage)

    def terminal(self, kind: str, finish_reason: FinishReason | None = None) -> None:
        self.emit(ProviderTerminal, kind=kind, finish_reason=finish_reason)

    def prove(self, reason: FinishReason = "stop", raw: str | None = "end_turn") -> None:
        """A genuine finish plus whatever end marker the attempt's contract needs as proof."""
        self.finish(reason, raw)
        if (self.contract, self.strict) not in FINISH_PROVES:
            incomplete = self.contract == "openai-responses" and reason == "length"
            kind = "response.incomplete" if incomplete else STRICT_TERMINAL[self.contract]
            self.terminal(kind)

    def closed(self) -> None:
        self.emit(StreamClosed)

    def stalled(self) -> None:
        self.emit(AttemptStalled, silent_ms=60_000)

    def error(
        self, status: int | None, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        self.emit(StreamError, status=status, body=body, headers=headers or {}, message="")

    def cancelled(self, reason: str = "user") -> None:
        self.emit(TurnCancelled, reason=reason)

    def cancelled_from_outside(self, reason: str = "user") -> None:
        """A cancel from the gateway or the CLI: outside the producer's numbering."""
        cancel = TurnCancelled(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=1,
            attempt=1,
            seq=0,
            reason=reason,
            external=True,
        )
        self.events.append(cancel)

    def ended(self) -> None:
        self.emit(TurnEnded, reason="no more tools")


def fold(
    events: Iterable[InboundEvent], config: CoreConfig = DEFAULT_CONFIG
) -> tuple[Turn, Outputs]:
    """Fold events from nothing into one turn, collecting every output in one sink."""
    turn: Turn | None = None
    out = Outputs()
    for event in events:
        turn, _ = evolve(turn, event, config, out)
    assert turn is not None, "no events"
    return turn, out


def snapshot(turn: Turn) -> bytes:
    """The turn's snapshot bytes, leaving out the ignored-event counters."""
    return msgspec.json.encode(msgspec.structs.replace(turn, ignored={}))


def frames_of(out: Outputs, kind: type[F]) -> list[F]:
    """The frames of one kind, in emission order."""
    return [frame for frame in out.frames if isinstance(frame, kind)]
