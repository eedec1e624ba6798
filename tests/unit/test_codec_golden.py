"""Golden bytes for every inbound event: one JSON layout, MessagePack with the same keys in the
same order, and the defaults a producer may leave out (STYLE rule 4)."""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest
from codec_samples import USAGE

from terminus.events.codec import (
    decode_event,
    encode_event,
    encode_json,
    encode_msgpack,
    sniff_format,
)
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


def golden(tag: str, own_fields: bytes = b"") -> bytes:
    """The JSON bytes of an event: its tag, the shared identity fields, then its own fields."""
    return b'{"type":"' + tag.encode() + b'",' + HEAD + own_fields + b"}"


GOLDEN: Final[list[tuple[InboundEvent, bytes]]] = [
    (
        TurnStarted(**IDS, max_attempts=4),
        golden("turn-started", b',"max_attempts":4,"traceparent":null'),
    ),
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
    (
        TurnCancelled(**IDS, reason="user"),
        golden("turn-cancelled", b',"reason":"user","external":false'),
    ),
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
