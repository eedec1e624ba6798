"""What the records of a turn say about each attempt and tool call: the facts its span is made of.

An attempt begins at its `attempt-started` and ends with its first transition out of the open
states (streaming, awaiting its proof); one that never ends that way ends with the turn. Its
outcome: `discarded` with the reason its `attempt_discarded` frame gave, else `proven` if its
step was proven, else `failed` if it ended the turn in failure. A `retrying` or
`compaction_required` frame names the attempt to come, so it belongs to the one before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import AttemptStarted, FinishStep
from terminus.events.outbound import (
    AgentError,
    AttemptDiscarded,
    CompactionRequiredFrame,
    Retrying,
    SessionUpdate,
    ToolCallFrame,
    ToolCallUpdate,
)
from terminus.service.traces import vocabulary as v
from terminus.service.traces.records import Record
from terminus.service.traces.spans import Attributes, SpanEvent
from terminus.statemachines.outputs import Transition

OPEN: Final = frozenset(("streaming", "awaiting_terminal"))
PROOFS: Final = frozenset(("prove", "prove_tool_calls", "prove_continuation"))
FAILURES: Final = frozenset(("fail", "exhaust"))

Key = tuple[int, int]  # (step, attempt)


@dataclass
class AttemptFacts:
    step: int
    attempt: int
    start_ms: int
    provider: str
    model: str
    end_ms: int | None = None
    ended_by: str | None = None  # the trigger of its first transition out of the open states
    finish: FinishStep | None = None
    discarded: str | None = None
    error: LLMErrorPayload | None = None
    events: list[SpanEvent] = field(default_factory=list)

    def outcome(self) -> tuple[str, str | None]:
        """`terminus.attempt.outcome` and its reason."""
        if self.discarded is not None:
            return "discarded", self.discarded
        if self.ended_by in PROOFS:
            return "proven", None
        if self.ended_by in FAILURES:
            return "failed", self.error.type if self.error else None
        return "discarded", "cancelled" if self.ended_by == "cancel" else "unfinished"

    def error_type(self) -> str | None:
        """The terminus error type of an attempt that failed: the error it ended on, else why
        it was cut short; none for one that was proven or cancelled."""
        if self.error is not None:
            return self.error.type
        outcome, reason = self.outcome()
        cancelled = self.ended_by == "cancel" or reason == "cancelled"
        return reason if outcome != "proven" and not cancelled else None


@dataclass
class ToolFacts:
    step: int
    attempt: int
    tool_call_id: str
    tool_name: str
    called_ms: int
    end_ms: int | None = None
    error: str | None = None


@dataclass
class TurnFacts:
    """Everything the spans of one turn are made of."""

    attempts: dict[Key, AttemptFacts] = field(default_factory=dict)
    tools: dict[str, ToolFacts] = field(default_factory=dict)
    error: LLMErrorPayload | None = None


def gather(records: Sequence[Record]) -> TurnFacts:
    """Walk the records once, in log order."""
    facts = TurnFacts()
    for record in records:
        _event(facts, record)
        for change in record.transitions:
            _transition(facts, change, record.at_ms)
        for frame in record.frames:
            _frame(facts, frame, record.at_ms)
    return facts


def _event(facts: TurnFacts, record: Record) -> None:
    event = record.event
    started = any(t.trigger == "start_attempt" for t in record.transitions)
    if isinstance(event, AttemptStarted) and started:
        facts.attempts[(event.step, event.attempt)] = AttemptFacts(
            step=event.step,
            attempt=event.attempt,
            start_ms=record.at_ms,
            provider=event.provider,
            model=event.model,
        )
    elif isinstance(event, FinishStep) and (found := facts.attempts.get(_key(event))):
        found.finish = event


def _key(event: FinishStep) -> Key:
    return event.step, event.attempt


def _transition(facts: TurnFacts, change: Transition, at_ms: int) -> None:
    found = facts.attempts.get((change.step, change.attempt))
    if found is None:
        return
    if found.end_ms is None and change.dest not in OPEN:
        found.end_ms, found.ended_by = at_ms, change.trigger
    elif found.end_ms == at_ms and change.source == "truncated":
        found.ended_by = change.trigger  # a cut resolves at once: retried, or given up


def _frame(facts: TurnFacts, frame: SessionUpdate, at_ms: int) -> None:
    match frame:
        case AttemptDiscarded() if found := facts.attempts.get((frame.step, frame.attempt)):
            found.discarded = frame.reason
        case Retrying() if found := facts.attempts.get((frame.step, frame.attempt - 1)):
            found.error = frame.error or found.error
            found.events.append(_retry_event(frame, at_ms))
        case CompactionRequiredFrame() if found := facts.attempts.get(
            (frame.step, frame.attempt - 1)
        ):
            found.error = frame.error
            attributes: Attributes = {v.ERROR_TYPE: frame.error.type}
            found.events.append(
                SpanEvent(name=v.COMPACTION_EVENT, at_ms=at_ms, attributes=attributes)
            )
        case AgentError():
            _failed(facts, frame.error, at_ms)
        case ToolCallFrame() | ToolCallUpdate():
            _tool(facts, frame, at_ms)
        case _:
            pass


def _retry_event(frame: Retrying, at_ms: int) -> SpanEvent:
    attributes: Attributes = {
        v.RETRY_DELAY: frame.delay_ms,
        v.RETRY_REASON: frame.reason,
        v.RETRY_ATTEMPT: frame.attempt,
    }
    if frame.error is not None:
        attributes[v.ERROR_TYPE] = frame.error.type
    return SpanEvent(name=v.RETRY_EVENT, at_ms=at_ms, attributes=attributes)


def _failed(facts: TurnFacts, error: LLMErrorPayload, at_ms: int) -> None:
    """The turn's one `agent_error`: the turn's error, and the error of the attempt that ended
    the turn with it (none, if the turn failed between attempts)."""
    facts.error = error
    for found in facts.attempts.values():
        if found.end_ms == at_ms and found.ended_by in FAILURES:
            found.error = error


def _tool(facts: TurnFacts, frame: ToolCallFrame | ToolCallUpdate, at_ms: int) -> None:
    found = facts.tools.get(frame.tool_call_id)
    if found is None or (found.step, found.attempt) != (frame.step, frame.attempt):
        # A call of a discarded attempt never ran: the retry's call of the same id replaces it.
        found = facts.tools[frame.tool_call_id] = ToolFacts(
            step=frame.step,
            attempt=frame.attempt,
            tool_call_id=frame.tool_call_id,
            tool_name=frame.tool_name,
            called_ms=at_ms,
        )
    if frame.status != "pending" and found.end_ms is None:
        found.end_ms = at_ms
        found.error = frame.error if isinstance(frame, ToolCallUpdate) else None
        if frame.status == "error" and found.error is None:
            found.error = "error"
