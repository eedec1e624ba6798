"""The span tree is a projection of the log (issue 36, invariant 4): the same log gives the same
tree, byte for byte, and entries the core ignores (a redelivered duplicate) change nothing; the
names it writes are the pinned semantic conventions'."""

from __future__ import annotations

from typing import Final

from hypothesis import given
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.semconv.schemas import Schemas
from opentelemetry.semconv.version import __version__ as semconv_version
from turn_generator import PROPERTY, GeneratedTurn, turns

from terminus.events.inbound import InboundEvent, TurnCancelled
from terminus.service.traces import vocabulary
from terminus.service.traces.project import project
from terminus.service.traces.records import fold_turn
from terminus.service.traces.spans import TurnTrace, encode

T0: Final = 1_700_000_000_000


def timed(events: list[InboundEvent]) -> list[tuple[int, InboundEvent]]:
    """The events one log ms apart, closed by a cancel from outside if they leave it open."""
    last = events[-1]
    cancel = TurnCancelled(
        session_id=last.session_id, turn_id=last.turn_id, seq=0, reason="user", external=True
    )
    return [(T0 + i, e) for i, e in enumerate([*events, cancel])]


def tree(log: list[tuple[int, InboundEvent]]) -> TurnTrace:
    records = fold_turn(log)
    assert records is not None
    return project(records)


@PROPERTY
@given(turns())
def test_the_same_log_gives_the_same_tree(spec: GeneratedTurn) -> None:
    log = timed(spec.events)
    assert encode(tree(log)) == encode(tree(list(log)))


@PROPERTY
@given(turns())
def test_redelivered_entries_change_no_span(spec: GeneratedTurn) -> None:
    log = timed(spec.events)
    doubled = [entry for entry in log for entry in (entry, entry)]
    assert encode(tree(doubled)) == encode(tree(log))


@PROPERTY
@given(turns())
def test_every_span_hangs_under_the_turn_within_its_time(spec: GeneratedTurn) -> None:
    trace = tree(timed(spec.events))
    root, children = trace.root, trace.spans[1:]
    assert root.parent_id is None
    assert root.name == "invoke_agent"
    assert len({s.span_id for s in trace.spans}) == len(trace.spans)
    for span in children:
        assert span.parent_id == root.span_id
        assert span.trace_id == root.trace_id
        assert root.start_ms <= span.start_ms <= span.end_ms <= root.end_ms
    chats = [s for s in children if s.attributes["gen_ai.operation.name"] == "chat"]
    assert len(chats) == len(spec.attempts)
    outcomes = {s.attributes["terminus.attempt.outcome"] for s in chats}
    assert outcomes <= {"proven", "discarded", "failed"}


def test_the_names_are_those_of_the_pinned_semantic_conventions() -> None:
    assert semconv_version == vocabulary.SEMCONV_VERSION
    assert Schemas.V1_44_0.value == vocabulary.SCHEMA_URL
    ours = {
        vocabulary.OPERATION: gen_ai.GEN_AI_OPERATION_NAME,
        vocabulary.CONVERSATION: gen_ai.GEN_AI_CONVERSATION_ID,
        vocabulary.PROVIDER: gen_ai.GEN_AI_PROVIDER_NAME,
        vocabulary.REQUEST_MODEL: gen_ai.GEN_AI_REQUEST_MODEL,
        vocabulary.FINISH_REASONS: gen_ai.GEN_AI_RESPONSE_FINISH_REASONS,
        vocabulary.INPUT_TOKENS: gen_ai.GEN_AI_USAGE_INPUT_TOKENS,
        vocabulary.OUTPUT_TOKENS: gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS,
        vocabulary.REASONING_TOKENS: gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        vocabulary.CACHE_READ_TOKENS: gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        vocabulary.CACHE_WRITE_TOKENS: gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        vocabulary.TOOL_NAME: gen_ai.GEN_AI_TOOL_NAME,
        vocabulary.TOOL_CALL_ID: gen_ai.GEN_AI_TOOL_CALL_ID,
        vocabulary.ERROR_TYPE: error_attributes.ERROR_TYPE,
    }
    assert [k for k, v in ours.items() if k != v] == []
    operations = gen_ai.GenAiOperationNameValues
    assert operations.INVOKE_AGENT.value == vocabulary.INVOKE_AGENT
    assert operations.CHAT.value == vocabulary.CHAT
    assert operations.EXECUTE_TOOL.value == vocabulary.EXECUTE_TOOL
    known = {value.value for value in gen_ai.GenAiProviderNameValues}
    assert set(vocabulary.PROVIDER_NAMES.values()) <= known
