"""A turn's span tree (issue 36): built from its recorded log by the pure projection, made OTel
SDK spans by the shell and caught by the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from traced_turns import CUT, NO_CREDIT, OVERLOADED, T0, TEXT, TOOL_USE, Log

from terminus.service.traces import otel
from terminus.service.traces.project import project
from terminus.service.traces.spans import TurnTrace

NS: Final = 1_000_000
CALLER_TRACE: Final = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN: Final = "00f067aa0ba902b7"
TRACEPARENT: Final = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
OVERFLOW: Final = "http-400-prompt-too-long-claude-code-issue12186.json"


def exported(log: Log) -> list[ReadableSpan]:
    """The turn's spans as the OTel SDK's in-memory exporter received them."""
    memory = InMemorySpanExporter()
    otel.export([project(log.records())], memory, otel.resource())
    return list(memory.get_finished_spans())


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def tree(spans: Sequence[ReadableSpan]) -> list[tuple[str, str | None]]:
    """(name, the parent's name) of every span, in export order."""
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    return [(s.name, names.get(s.parent.span_id) if s.parent else None) for s in spans]


def test_a_cut_and_retried_turn_is_one_turn_span_over_a_discarded_and_a_proven_attempt() -> None:
    log = Log()
    log.attempt_file(CUT)
    log.attempt_file(TEXT)
    spans = exported(log)
    turn, cut, proven = spans
    assert tree(spans) == [
        ("invoke_agent", None),
        ("chat claude-sonnet-4-5", "invoke_agent"),
        ("chat claude-sonnet-4-5", "invoke_agent"),
    ]
    assert attrs(turn) | {"gen_ai.conversation.id": "sess-traces"} == attrs(turn)
    assert attrs(turn)["terminus.turn.state"] == "finished"
    assert attrs(cut) | {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "terminus.step": 1,
        "terminus.attempt": 1,
        "terminus.attempt.outcome": "discarded",
        "terminus.attempt.reason": "missing_terminal",
        "error.type": "missing_terminal",
    } == attrs(cut)
    assert cut.kind is SpanKind.CLIENT
    assert cut.status.status_code is StatusCode.ERROR
    (retry,) = cut.events
    assert retry.name == "terminus.retry_scheduled"
    assert dict(retry.attributes or {})["terminus.retry.attempt"] == 2
    assert int(str(dict(retry.attributes or {})["terminus.retry.delay_ms"])) > 0
    assert attrs(proven)["terminus.attempt.outcome"] == "proven"
    assert attrs(proven)["gen_ai.response.finish_reasons"] == ("stop",)
    assert int(str(attrs(proven)["gen_ai.usage.output_tokens"])) > 0
    assert "error.type" not in attrs(proven)
    # Times are the log's: one entry per ms from T0.
    assert turn.start_time == T0 * NS
    assert cut.start_time == (T0 + 1) * NS
    assert cut.end_time is not None
    assert proven.start_time is not None
    assert cut.end_time < proven.start_time
    assert proven.end_time == turn.end_time


def test_a_failed_turn_carries_the_terminus_error_type_on_its_last_attempt_and_itself() -> None:
    log = Log()
    log.attempt_file(OVERLOADED)
    log.attempt_file(NO_CREDIT)
    turn, overloaded, broke = exported(log)
    assert attrs(overloaded)["error.type"] == "provider_unavailable"
    assert attrs(overloaded)["terminus.attempt.outcome"] == "discarded"
    assert attrs(broke)["error.type"] == "budget"
    assert attrs(broke)["terminus.attempt.outcome"] == "failed"
    assert attrs(turn)["error.type"] == "budget"
    assert attrs(turn)["terminus.turn.state"] == "failed"
    assert turn.status.status_code is StatusCode.ERROR
    assert "credit balance" in str(turn.status.description)


def test_a_tool_step_runs_its_tool_between_the_two_proven_steps() -> None:
    log = Log()
    log.attempt_file(TOOL_USE)
    log.tool_results()
    log.attempt_file(TEXT, next_step=True)
    spans = exported(log)
    assert tree(spans) == [
        ("invoke_agent", None),
        ("chat claude-sonnet-4-5", "invoke_agent"),
        ("execute_tool weather", "invoke_agent"),
        ("chat claude-sonnet-4-5", "invoke_agent"),
    ]
    _, step1, tool, step2 = spans
    assert attrs(step1)["gen_ai.response.finish_reasons"] == ("tool-calls",)
    assert attrs(tool)["gen_ai.tool.name"] == "weather"
    assert attrs(tool)["gen_ai.operation.name"] == "execute_tool"
    assert (attrs(step1)["terminus.step"], attrs(step2)["terminus.step"]) == (1, 2)
    assert step1.end_time == tool.start_time
    assert tool.end_time is not None
    assert step2.start_time is not None
    assert tool.end_time < step2.start_time


def test_a_cancelled_turn_discards_its_open_attempt_without_calling_it_an_error() -> None:
    log = Log()
    log.attempt_file(TEXT, keep=3)
    log.cancel()
    turn, attempt = exported(log)
    assert attrs(turn)["terminus.turn.state"] == "cancelled"
    assert attrs(turn)["terminus.turn.stop_reason"] == "cancelled"
    assert attrs(attempt)["terminus.attempt.outcome"] == "discarded"
    assert attrs(attempt)["terminus.attempt.reason"] == "user"
    assert "error.type" not in attrs(attempt)
    assert attempt.status.status_code is StatusCode.UNSET
    assert attempt.end_time == turn.end_time


def test_a_compaction_is_an_event_on_the_attempt_that_overflowed() -> None:
    log = Log()
    log.attempt_file(OVERFLOW)
    log.attempt_file(TEXT)
    _, overflowed, _ = exported(log)
    assert [e.name for e in overflowed.events] == ["terminus.compaction_required"]
    assert attrs(overflowed)["error.type"] == "context_overflow"


def test_a_propagated_traceparent_is_the_turn_spans_parent() -> None:
    log = Log(traceparent=TRACEPARENT)
    log.attempt_file(TEXT)
    turn, attempt = exported(log)
    assert turn.parent is not None
    assert turn.parent.is_remote
    assert format(turn.parent.span_id, "016x") == CALLER_SPAN
    assert {format(s.context.trace_id, "032x") for s in (turn, attempt) if s.context} == {
        CALLER_TRACE
    }
    assert attempt.parent is not None
    assert turn.context is not None
    assert attempt.parent.span_id == turn.context.span_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        f"00-{'0' * 32}-{CALLER_SPAN}-01",
        f"00-{CALLER_TRACE}-{'0' * 16}-01",
        "not a traceparent",
    ],
)
def test_a_traceparent_that_does_not_parse_is_ignored(bad: str) -> None:
    log = Log(traceparent=bad)
    log.attempt_file(TEXT)
    trace = project(log.records())
    assert trace.root.parent_id is None
    assert trace.root.trace_id == project(_plain().records()).root.trace_id


def _plain() -> Log:
    log = Log()
    log.attempt_file(TEXT)
    return log


def test_ids_are_derived_from_the_turn_and_differ_between_turns() -> None:
    first: TurnTrace = project(_plain().records())
    ids = [s.span_id for s in first.spans]
    assert len(set(ids)) == len(ids)
    assert all(int(i, 16) for i in ids)
    assert len(first.root.trace_id) == 32
    assert len(ids[0]) == 16
    log = Log()
    log.attempt_file(CUT)
    log.attempt_file(TEXT)
    other = project(log.records())
    assert other.root.trace_id == first.root.trace_id  # the same session and turn ids
    assert other.spans[1].span_id == first.spans[1].span_id  # step 1, attempt 1
