"""A final turn's records -> its span tree: pure, so the same log gives the same tree.

The turn is one `invoke_agent` span, from its `turn-started` to the transition that made it
final. Each attempt is a `chat {model}` span under it, and each tool call that ran an
`execute_tool {name}` span, from the proof of the step that called it (or its call, if later)
to its result. Retries and compactions are events on the attempt they followed. Every time is
the log's (`Record.at_ms`), never a clock's; ids come from `ids.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from terminus.events.inbound import TurnStarted, Usage
from terminus.events.outbound import TurnFinished
from terminus.service.traces import vocabulary as v
from terminus.service.traces.attempts import AttemptFacts, ToolFacts, TurnFacts, gather
from terminus.service.traces.ids import parse_traceparent, span_id_of, trace_id_of
from terminus.service.traces.records import Record
from terminus.service.traces.spans import Attributes, Span, TurnTrace
from terminus.statemachines.states import FINAL_STATES


class _Frame:
    """What every span of the turn shares: its trace, the turn span's id, the turn's end."""

    def __init__(self, start: TurnStarted, end_ms: int) -> None:
        self.session_id, self.turn_id = start.session_id, start.turn_id
        self.parent = parse_traceparent(start.traceparent)
        self.trace_id = self.parent.trace_id if self.parent else trace_id_of(*self.ids)
        self.sampled = self.parent.sampled if self.parent else True
        self.turn_span_id = span_id_of(*self.ids)
        self.end_ms = end_ms

    @property
    def ids(self) -> tuple[str, str]:
        return self.session_id, self.turn_id

    def child(self, span: Span, *position: str | int) -> Span:
        """`span` placed under the turn's, at `position` (step and attempt, or "tool" and the
        call's id)."""
        return msgspec.structs.replace(
            span,
            trace_id=self.trace_id,
            span_id=span_id_of(*self.ids, *position),
            parent_id=self.turn_span_id,
            sampled=self.sampled,
        )


def project(records: Sequence[Record]) -> TurnTrace:
    """The span tree of a final turn whose records, in log order, begin with `turn-started`."""
    start = records[0].event
    if not isinstance(start, TurnStarted):
        raise ValueError(f"turn {start.turn_id}: its records begin with {type(start).__name__}")
    frame = _Frame(start, _end_ms(records))
    facts = gather(records)
    children = [_attempt_span(frame, a) for a in facts.attempts.values()]
    children += [_tool_span(frame, facts, t) for t in facts.tools.values() if t.end_ms]
    children.sort(key=lambda span: span.start_ms)  # stable: attempts before tools of one ms
    root = _turn_span(frame, records, facts)
    return TurnTrace(session_id=frame.session_id, turn_id=frame.turn_id, spans=[root, *children])


def _end_ms(records: Sequence[Record]) -> int:
    for record in records:
        if any(t.dest in FINAL_STATES for t in record.transitions):
            return record.at_ms
    raise ValueError(f"turn {records[0].event.turn_id} is not final in its records")


def _turn_span(frame: _Frame, records: Sequence[Record], facts: TurnFacts) -> Span:
    final = next(t for r in records for t in r.transitions if t.dest in FINAL_STATES)
    attributes: Attributes = {
        v.OPERATION: v.INVOKE_AGENT,
        v.CONVERSATION: frame.session_id,
        v.TURN_ID: frame.turn_id,
        v.TURN_STATE: final.dest,
        v.TURN_ATTEMPTS: len(facts.attempts),
    }
    ended = [f for r in records for f in r.frames if isinstance(f, TurnFinished)]
    if ended:
        attributes[v.STOP_REASON] = ended[0].stopReason
        attributes |= _usage(ended[0].usage)
    if facts.error is not None:
        attributes[v.STOP_REASON] = "error"
        attributes[v.ERROR_TYPE] = facts.error.type
    parent = frame.parent
    return Span(
        name=v.INVOKE_AGENT,
        kind="internal",
        trace_id=frame.trace_id,
        span_id=frame.turn_span_id,
        parent_id=parent.span_id if parent else None,
        parent_remote=parent is not None,
        sampled=frame.sampled,
        start_ms=records[0].at_ms,
        end_ms=frame.end_ms,
        attributes=attributes,
        error=facts.error.message if facts.error else None,
    )


def _attempt_span(frame: _Frame, facts: AttemptFacts) -> Span:
    outcome, reason = facts.outcome()
    attributes: Attributes = {
        v.OPERATION: v.CHAT,
        v.PROVIDER: v.provider_name(facts.provider),
        v.RAW_PROVIDER: facts.provider,
        v.CONVERSATION: frame.session_id,
        v.STEP: facts.step,
        v.ATTEMPT: facts.attempt,
        v.OUTCOME: outcome,
    }
    if facts.model:
        attributes[v.REQUEST_MODEL] = facts.model
    if reason is not None:
        attributes[v.OUTCOME_REASON] = reason
    if facts.finish is not None:
        attributes[v.FINISH_REASONS] = [facts.finish.finish_reason]
        attributes |= _usage(facts.finish.usage)
    error_type = facts.error_type()
    if error_type is not None:
        attributes[v.ERROR_TYPE] = error_type
    span = _unplaced(
        f"{v.CHAT} {facts.model}" if facts.model else v.CHAT,
        kind="client",
        start_ms=facts.start_ms,
        end_ms=frame.end_ms if facts.end_ms is None else facts.end_ms,
        attributes=attributes,
        events=list(facts.events),
        error=_description(facts, error_type),
    )
    return frame.child(span, facts.step, facts.attempt)


def _description(facts: AttemptFacts, error_type: str | None) -> str | None:
    if error_type is None:
        return None
    return facts.error.message if facts.error is not None else error_type


def _tool_span(frame: _Frame, facts: TurnFacts, tool: ToolFacts) -> Span:
    caller = facts.attempts.get((tool.step, tool.attempt))
    proven = caller.end_ms if caller is not None and caller.end_ms is not None else 0
    attributes: Attributes = {
        v.OPERATION: v.EXECUTE_TOOL,
        v.TOOL_NAME: tool.tool_name,
        v.TOOL_CALL_ID: tool.tool_call_id,
        v.STEP: tool.step,
    }
    if tool.error is not None:
        attributes[v.ERROR_TYPE] = "tool_error"
    assert tool.end_ms is not None
    span = _unplaced(
        f"{v.EXECUTE_TOOL} {tool.tool_name}",
        kind="internal",
        start_ms=min(max(tool.called_ms, proven), tool.end_ms),
        end_ms=tool.end_ms,
        attributes=attributes,
        error=tool.error,
    )
    return frame.child(span, "tool", tool.tool_call_id)


def _unplaced(name: str, **fields: Any) -> Span:
    """A span with its times and attributes, before `_Frame.child` gives it ids."""
    return Span(
        name=name,
        trace_id="",
        span_id="",
        parent_id=None,
        parent_remote=False,
        sampled=True,
        **fields,
    )


def _usage(usage: Usage) -> Attributes:
    """Token counts: input and output always, the others when the provider reported them."""
    counts: Attributes = {
        v.INPUT_TOKENS: usage.input_tokens,
        v.OUTPUT_TOKENS: usage.output_tokens,
    }
    optional = (
        (v.REASONING_TOKENS, usage.reasoning_tokens),
        (v.CACHE_READ_TOKENS, usage.cache_read_tokens),
        (v.CACHE_WRITE_TOKENS, usage.cache_write_tokens),
    )
    counts |= {name: count for name, count in optional if count}
    return counts
