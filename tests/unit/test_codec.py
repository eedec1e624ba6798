"""The wire contract: golden bytes for every inbound event, decode errors that name the field,
and roundtrips of frames, commands and records (STYLE rule 4)."""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest
from factories import AUTH_BODY, OVERFLOW_BODY, Script, fold

from terminus.events.codec import (
    MAX_EVENT_BYTES,
    CodecError,
    EventDecodeError,
    EventTooLarge,
    decode_command,
    decode_event,
    decode_frame,
    decode_message,
    decode_partial,
    encode_event,
    encode_json,
    encode_msgpack,
    sniff_format,
)
from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import (
    EVENT_TYPES,
    AttemptStalled,
    AttemptStarted,
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
    type_of,
)
from terminus.events.outbound import (
    AgentError,
    AgentMessageChunk,
    AgentThoughtChunk,
    AttemptDiscarded,
    CompactionRequired,
    CompactionRequiredFrame,
    MessageCommitted,
    PartialRecord,
    PersistedMessage,
    ReasoningPart,
    Retrying,
    RetryScheduled,
    SessionUpdate,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCallFrame,
    ToolCallUpdate,
    ToolPart,
    TurnFinished,
)

IDS: Final[dict[str, Any]] = {
    "session_id": "s1",
    "turn_id": "t1",
    "step": 2,
    "attempt": 3,
    "seq": 5,
    "ts_ms": 1_700_000_000_000,
}
HEAD: Final = (
    b'"v":1,"session_id":"s1","turn_id":"t1","step":2,"attempt":3,"seq":5,"ts_ms":1700000000000'
)
USAGE: Final = Usage(
    input_tokens=10,
    output_tokens=20,
    reasoning_tokens=3,
    cache_read_tokens=4,
    cache_write_tokens=5,
)


def golden(tag: str, own_fields: bytes = b"") -> bytes:
    """The JSON bytes of an event: its tag, the shared identity fields, then its own fields."""
    return b'{"type":"' + tag.encode() + b'",' + HEAD + own_fields + b"}"


GOLDEN: Final[list[tuple[InboundEvent, bytes]]] = [
    (TurnStarted(**IDS, max_attempts=4), golden("turn-started", b',"max_attempts":4')),
    (
        AttemptStarted(
            **IDS, provider="anthropic", model="claude", contract="anthropic-messages", strict=False
        ),
        golden(
            "attempt-started",
            b',"provider":"anthropic","model":"claude","contract":"anthropic-messages"'
            b',"strict":false',
        ),
    ),
    (TextStart(**IDS, part_id="p1"), golden("text-start", b',"part_id":"p1"')),
    (
        TextDelta(**IDS, part_id="p1", delta="Hi \u2713"),
        golden("text-delta", b',"part_id":"p1","delta":"Hi \xe2\x9c\x93"'),
    ),
    (TextEnd(**IDS, part_id="p1"), golden("text-end", b',"part_id":"p1"')),
    (ReasoningStart(**IDS, part_id="r1"), golden("reasoning-start", b',"part_id":"r1"')),
    (
        ReasoningDelta(**IDS, part_id="r1", delta="think"),
        golden("reasoning-delta", b',"part_id":"r1","delta":"think"'),
    ),
    (
        ReasoningEnd(**IDS, part_id="r1", signature="sig"),
        golden("reasoning-end", b',"part_id":"r1","signature":"sig"'),
    ),
    (
        ToolInputStart(**IDS, tool_call_id="c1", tool_name="search"),
        golden("tool-input-start", b',"tool_call_id":"c1","tool_name":"search"'),
    ),
    (
        ToolInputDelta(**IDS, tool_call_id="c1", tool_name="search", delta='{"q":'),
        golden(
            "tool-input-delta", b',"tool_call_id":"c1","tool_name":"search","delta":"{\\"q\\":"'
        ),
    ),
    (
        ToolCall(**IDS, tool_call_id="c1", tool_name="search", input={"q": "x", "n": 2}),
        golden("tool-call", b',"tool_call_id":"c1","tool_name":"search","input":{"q":"x","n":2}'),
    ),
    (
        ToolResult(**IDS, tool_call_id="c1", output="found"),
        golden("tool-result", b',"tool_call_id":"c1","output":"found"'),
    ),
    (
        ToolError(**IDS, tool_call_id="c1", error="denied"),
        golden("tool-error", b',"tool_call_id":"c1","error":"denied"'),
    ),
    (
        FinishStep(**IDS, finish_reason="length", raw_finish_reason="max_tokens", usage=USAGE),
        golden(
            "finish-step",
            b',"finish_reason":"length","raw_finish_reason":"max_tokens","usage":{"input_tokens":10'
            b',"output_tokens":20,"reasoning_tokens":3,"cache_read_tokens":4,"cache_write_tokens":5}',
        ),
    ),
    (
        ProviderTerminal(**IDS, kind="message_stop", finish_reason="stop"),
        golden("provider-terminal", b',"kind":"message_stop","finish_reason":"stop"'),
    ),
    (
        StreamError(
            **IDS,
            status=529,
            headers={"retry-after": "2"},
            body={"type": "error"},
            message="Overloaded",
        ),
        golden(
            "stream-error",
            b',"status":529,"headers":{"retry-after":"2"},"body":{"type":"error"}'
            b',"message":"Overloaded"',
        ),
    ),
    (StreamClosed(**IDS), golden("stream-closed")),
    (AttemptStalled(**IDS, silent_ms=60_000), golden("attempt-stalled", b',"silent_ms":60000')),
    (TurnCancelled(**IDS, reason="user"), golden("turn-cancelled", b',"reason":"user"')),
    (TurnEnded(**IDS, reason="done"), golden("turn-ended", b',"reason":"done"')),
]
GOLDEN_IDS: Final = [type_of(event) for event, _ in GOLDEN]


def test_golden_covers_every_inbound_type() -> None:
    assert sorted(GOLDEN_IDS) == sorted(str(cls.__struct_config__.tag) for cls in EVENT_TYPES)
    assert len(set(GOLDEN_IDS)) == len(EVENT_TYPES)


@pytest.mark.parametrize(("event", "wire"), GOLDEN, ids=GOLDEN_IDS)
def test_json_golden_bytes(event: InboundEvent, wire: bytes) -> None:
    assert encode_event(event) == wire
    assert encode_event(event, "json") == encode_json(event)
    assert decode_event(wire) == event
    assert decode_event(wire.decode()) == event
    assert sniff_format(wire) == "json"


@pytest.mark.parametrize(("event", "wire"), GOLDEN, ids=GOLDEN_IDS)
def test_msgpack_roundtrip_has_the_json_layout(event: InboundEvent, wire: bytes) -> None:
    packed = encode_event(event, "msgpack")
    assert packed == encode_msgpack(event)
    # Same keys, same order, same values as the golden JSON: one contract, two encodings.
    assert packed == msgspec.msgpack.encode(msgspec.json.decode(wire))
    assert sniff_format(packed) == "msgpack"
    assert decode_event(packed, "msgpack") == event


def test_defaults_fill_in_what_producers_leave_out() -> None:
    event = decode_event(b'{"type":"attempt-started","session_id":"s","turn_id":"t","seq":1}')
    assert event == AttemptStarted(session_id="s", turn_id="t", seq=1)
    assert isinstance(event, AttemptStarted)
    assert (event.v, event.step, event.attempt, event.ts_ms) == (1, 1, 1, 0)
    assert (event.contract, event.strict) == ("ai-sdk", True)
    finish = decode_event(
        b'{"type":"finish-step","session_id":"s","turn_id":"t","seq":2,"finish_reason":"stop"}'
    )
    assert isinstance(finish, FinishStep)
    assert (finish.raw_finish_reason, finish.usage) == (None, Usage())


EVENT_FIELDS: Final = b'"session_id":"s","turn_id":"t"'


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        pytest.param(
            b'{"type":"text-delta",' + EVENT_FIELDS + b',"seq":"5","part_id":"p","delta":"d"}',
            "$.seq",
            "Expected `int`",
            id="wrong-type-seq",
        ),
        pytest.param(
            b'{"type":"text-delta",' + EVENT_FIELDS + b',"seq":5,"part_id":7,"delta":"d"}',
            "$.part_id",
            "Expected `str`",
            id="wrong-type-part-id",
        ),
        pytest.param(
            b'{"type":"finish-step",'
            + EVENT_FIELDS
            + b',"seq":5,"finish_reason":"stop","usage":{"output_tokens":"many"}}',
            "$.usage.output_tokens",
            "Expected `int`",
            id="wrong-type-nested",
        ),
        pytest.param(
            b'{"type":"finish-step",' + EVENT_FIELDS + b',"seq":5,"finish_reason":"done"}',
            "$.finish_reason",
            "'done'",
            id="unknown-finish-reason",
        ),
        pytest.param(
            b'{"type":"text-shout",' + EVENT_FIELDS + b',"seq":5}',
            "$.type",
            "'text-shout'",
            id="unknown-type",
        ),
        pytest.param(
            b'{"type":"text-delta",' + EVENT_FIELDS + b',"seq":5,"delta":"d"}',
            "$.part_id",
            "missing required field `part_id`",
            id="missing-part-id",
        ),
        pytest.param(
            b'{"type":"text-end",' + EVENT_FIELDS + b',"part_id":"p"}',
            "$.seq",
            "missing required field `seq`",
            id="missing-seq",
        ),
        pytest.param(
            b"{" + EVENT_FIELDS + b',"seq":5}',
            "$.type",
            "missing required field `type`",
            id="missing-type",
        ),
        pytest.param(b'{"type":"text-delta",', "$", "malformed json", id="truncated-json"),
        pytest.param(b"{not json}", "$", "malformed json", id="malformed-json"),
        pytest.param(b"[1, 2]", "$", "Expected `object`", id="not-an-object"),
    ],
)
def test_json_decode_errors_name_the_field(raw: bytes, field: str, words: str) -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(raw, "json")
    assert caught.value.field == field
    assert words in str(caught.value)
    leaf = field.rsplit(".", 1)[-1]
    assert field == "$" or f"`{leaf}`" in str(caught.value) or field in str(caught.value)
    assert isinstance(caught.value, CodecError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (
            {"type": "text-end", "session_id": "s", "turn_id": "t", "seq": 1.5, "part_id": "p"},
            "$.seq",
        ),
        ({"type": "nope", "session_id": "s", "turn_id": "t", "seq": 1}, "$.type"),
        ({"type": "text-end", "session_id": "s", "turn_id": "t", "seq": 1}, "$.part_id"),
    ],
)
def test_msgpack_decode_errors_name_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(msgspec.msgpack.encode(payload), "msgpack")
    assert caught.value.field == field


def test_malformed_msgpack_is_a_decode_error_at_the_root() -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(b"\xc1", "msgpack")
    assert caught.value.field == "$"
    assert "malformed msgpack" in str(caught.value)


def _delta_of_size(size: int) -> bytes:
    """A valid text-delta event of exactly `size` bytes."""
    empty = encode_event(TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta=""))
    return encode_event(
        TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta="x" * (size - len(empty)))
    )


def test_event_at_the_size_limit_decodes() -> None:
    raw = _delta_of_size(MAX_EVENT_BYTES)
    assert len(raw) == MAX_EVENT_BYTES
    assert isinstance(decode_event(raw), TextDelta)


@pytest.mark.parametrize("fmt", ["json", "msgpack"])
def test_oversize_payload_is_too_large_and_never_parsed(fmt: str) -> None:
    oversize = _delta_of_size(MAX_EVENT_BYTES + 1)
    garbage = b"\xc1" * (MAX_EVENT_BYTES + 1)  # would be a decode error if it were parsed
    for raw in (oversize, garbage):
        with pytest.raises(EventTooLarge) as caught:
            decode_event(raw, "json" if fmt == "json" else "msgpack")
        assert caught.value.field == "$"
        assert str(MAX_EVENT_BYTES) in str(caught.value)
        assert isinstance(caught.value, CodecError)


def test_oversize_text_payload_is_measured_in_bytes() -> None:
    # 400,000 check marks are 1.2 MB of UTF-8 but only 400,000 characters.
    delta = "\u2713" * 400_000
    raw = encode_event(TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta=delta))
    assert len(raw) > MAX_EVENT_BYTES
    with pytest.raises(EventTooLarge):
        decode_event(raw)
    with pytest.raises(EventTooLarge):
        decode_event(raw.decode())


# --- frames, commands and read models ---------------------------------------------------------

ERROR: Final = LLMErrorPayload(
    type="rate_limit",
    message="slow down",
    retryable=True,
    status=429,
    retry_after_seconds=2.5,
    reset_at_epoch_ms=1_700_000_002_500,
    provider="anthropic",
    model="claude",
    attempt=1,
)
SID: Final[dict[str, Any]] = {"session_id": "s1", "turn_id": "t1"}
FRAMES: Final[list[SessionUpdate]] = [
    AgentMessageChunk(**SID, step=1, attempt=1, part_id="p1", delta="hi"),
    AgentThoughtChunk(**SID, step=1, attempt=1, part_id="r1", delta="hmm"),
    ToolCallFrame(**SID, step=1, attempt=1, tool_call_id="c1", tool_name="search"),
    ToolCallUpdate(
        **SID,
        step=1,
        attempt=1,
        tool_call_id="c1",
        tool_name="search",
        input={"q": "x"},
        status="completed",
        output="found",
    ),
    AttemptDiscarded(**SID, step=1, attempt=1, part_ids=["p1", "c1"], reason="missing_terminal"),
    Retrying(
        **SID, step=1, attempt=2, max_attempts=3, delay_ms=2500, reason="rate_limit", error=ERROR
    ),
    CompactionRequiredFrame(**SID, step=1, attempt=2, error=ERROR),
    MessageCommitted(**SID, message_id="msg-t1", step=1),
    AgentError(**SID, error=ERROR),
    TurnFinished(**SID, stopReason="max_tokens", usage=USAGE),
]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: type(f).__name__)
def test_frame_roundtrip(frame: SessionUpdate) -> None:
    wire = encode_json(frame)
    assert decode_frame(wire) == frame
    assert msgspec.json.decode(wire)["sessionUpdate"] == frame.__struct_config__.tag


def test_frame_golden_bytes() -> None:
    frame = AttemptDiscarded(**SID, step=1, attempt=2, part_ids=["p1"], reason="stalled")
    assert encode_json(frame) == (
        b'{"sessionUpdate":"attempt_discarded","session_id":"s1","turn_id":"t1","cursor":null,'
        b'"step":1,"attempt":2,"part_ids":["p1"],"reason":"stalled"}'
    )
    error = AgentError(
        **SID, error=LLMErrorPayload(type="auth", message="bad key", retryable=False, status=401)
    )
    assert encode_json(error) == (
        b'{"sessionUpdate":"agent_error","session_id":"s1","turn_id":"t1","cursor":null,'
        b'"error":{"type":"auth","message":"bad key","retryable":false,"status":401,'
        b'"retry_after_seconds":null,"reset_at_epoch_ms":null,"provider":null,"model":null,'
        b'"attempt":null},"stopReason":"error"}'
    )


MESSAGE: Final = PersistedMessage(
    message_id="msg-t1",
    session_id="s1",
    turn_id="t1",
    parts=[
        StepStartPart(step=1),
        ReasoningPart(part_id="r1", text="hmm", signature="sig"),
        TextPart(part_id="p1", text="hi"),
        ToolPart(
            tool_call_id="c1", name="search", input={"q": "x"}, state="completed", output="ok"
        ),
        ToolPart(tool_call_id="c2", name="fetch", input=None, state="incomplete"),
        StepFinishPart(step=1, finish_reason="tool-calls", usage=USAGE),
    ],
    finish_reason="tool-calls",
    usage=USAGE,
    provider="anthropic",
    model="claude",
)


def test_persisted_message_roundtrip() -> None:
    assert decode_message(encode_json(MESSAGE)) == MESSAGE
    assert decode_message(encode_json(MESSAGE).decode()) == MESSAGE


def test_persisted_message_golden_bytes() -> None:
    message = PersistedMessage(
        message_id="msg-t1",
        session_id="s1",
        turn_id="t1",
        parts=[
            StepStartPart(step=1),
            TextPart(part_id="p1", text="hi"),
            ToolPart(tool_call_id="c1", name="f", input={}, state="error", error="boom"),
            StepFinishPart(step=1, finish_reason="stop", usage=Usage(output_tokens=1)),
        ],
        finish_reason="stop",
        usage=Usage(output_tokens=1),
        provider="p",
        model="m",
    )
    usage = (
        b'{"input_tokens":0,"output_tokens":1,"reasoning_tokens":0,'
        b'"cache_read_tokens":0,"cache_write_tokens":0}'
    )
    assert encode_json(message) == (
        b'{"message_id":"msg-t1","session_id":"s1","turn_id":"t1","role":"assistant","parts":['
        b'{"type":"step-start","step":1},'
        b'{"type":"text","part_id":"p1","text":"hi"},'
        b'{"type":"tool","tool_call_id":"c1","name":"f","input":{},"state":"error",'
        b'"output":null,"error":"boom"},'
        b'{"type":"step-finish","step":1,"finish_reason":"stop","usage":' + usage + b"}],"
        b'"finish_reason":"stop","usage":' + usage + b',"provider":"p","model":"m"}'
    )


def test_partial_record_and_commands_roundtrip() -> None:
    partial = PartialRecord(
        **SID, step=1, attempt=3, parts=MESSAGE.parts[1:3], reason="stalled", error=ERROR
    )
    assert decode_partial(encode_json(partial)) == partial
    retry = RetryScheduled(
        **SID, step=1, attempt=2, delay_ms=500, not_before_ms=1_700_000_000_500, reason="stalled"
    )
    compaction = CompactionRequired(**SID, step=1, attempt=2, error=ERROR)
    for command in (retry, compaction):
        wire = encode_json(command)
        assert decode_command(wire) == command
        assert msgspec.json.decode(wire)["type"] == command.__struct_config__.tag


def test_everything_a_fold_produces_roundtrips() -> None:
    s = Script(contract="anthropic-messages")
    s.reasoning("r1", "plan", signature="sig")
    s.text("p1", "partial")
    s.error(400, OVERFLOW_BODY)
    s.next_attempt()
    s.tool_input("c1")
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1", "42")
    s.next_step()
    s.text("p2", "answer")
    s.closed()
    s.next_attempt()
    s.error(401, AUTH_BODY)
    _, out = fold(s.events)
    assert out.frames
    assert out.messages
    assert out.partials
    assert out.commands
    assert [decode_frame(encode_json(f)) for f in out.frames] == out.frames
    assert [decode_message(encode_json(m)) for m in out.messages] == out.messages
    assert [decode_partial(encode_json(p)) for p in out.partials] == out.partials
    assert [decode_command(encode_json(c)) for c in out.commands] == out.commands
    for event in s.events:
        assert decode_event(encode_event(event)) == event
        assert decode_event(encode_event(event, "msgpack"), "msgpack") == event


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"text-delta","session_id":"s\xff","turn_id":"t","seq":1,"part_id":"p","delta":"x"}',
        b'{"type":"text-end","session_id":"s","turn_id":"t","seq":1,"part_id":"p","x":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        b'{"type":"turn-started","session_id":"s","turn_id":"t","seq":0,"max_attempts":1'
        + b"0" * 30
        + b"}",
    ],
    ids=["not-utf8", "deep-nesting", "integer-out-of-range"],
)
def test_hostile_bytes_are_a_codec_error_and_nothing_else(raw: bytes) -> None:
    with pytest.raises(CodecError):
        decode_event(raw)
