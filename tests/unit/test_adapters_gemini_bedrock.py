"""Gemini, Bedrock ConverseStream and AWS event-stream decoding against recordings."""

from __future__ import annotations

import binascii
import struct
from typing import Any

import msgspec
import pytest
from test_adapters_support import FIXTURES, Expect, assert_outcome, run_fixture, run_payloads, usage

from terminus.events.adapters import AdapterError, decode_eventstream
from terminus.events.inbound import FinishStep, ReasoningEnd, ToolInputStart

EVENTSTREAM = (
    FIXTURES / "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.eventstream"
)
ITEMS = {
    "operations": [
        {"action": "add", "description": "Fresh red apple", "itemid": "apple_001", "price": 0.5},
        {
            "action": "add",
            "description": "Ripe yellow banana",
            "itemid": "banana_001",
            "price": 0.3,
        },
    ]
}

CASES: dict[str, Expect] = {
    "gemini/text-stop-recorded-fantasy.sse": Expect(
        text="Olá!", finish="stop", usage=usage(11, 2, 21)
    ),
    "gemini/multi-chunk-text-recorded-fantasy.sse": Expect(
        text="The weather in Florence,Italy is 40 C.", finish="stop", usage=usage(127, 12)
    ),
    "gemini/function-call-recorded-fantasy.sse": Expect(
        tools=(("call_p2.3.0", "weather", {"location": "Florence,Italy"}),),
        finish="tool-calls",
        usage=usage(54, 15, 43),
    ),
    "gemini/text-stop-curl-simonw-llm-gemini-issue97.sse": Expect(
        text="**Spanish:** Hola", finish="stop", usage=usage(5, 44, 186)
    ),
    "gemini/vertex-streaming-function-call-partial-args-vercel-ai.jsonl": Expect(
        tools=(("call_p2.3.0", "writeItems", ITEMS),), finish="tool-calls", usage=usage(54, 74, 121)
    ),
    "bedrock/converse-stream-text-vercel-ai.jsonl": Expect(
        text='There are **3** r\'s in "strawberry."',
        finish="stop",
        usage=usage(22, 55),
        terminal="messageStop",
    ),
    "bedrock/converse-stream-reasoning-vercel-ai.jsonl": Expect(
        text="There are **3** r's",
        reasoning="So there are 3 r's.",
        finish="stop",
        usage=usage(51, 94),
        terminal="messageStop",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_outcome(name: str) -> None:
    assert_outcome(run_fixture(name), CASES[name])


def _gemini(parts: list[Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": {"cachedContentTokenCount": 4}}


@pytest.mark.parametrize(
    ("payloads", "expect"),
    [
        (
            [_gemini([{"text": "hm", "thought": True}, {"text": "a"}], "STOP")],
            Expect("a", "hm", finish="stop"),
        ),
        ([_gemini([{"text": "a"}], "MAX_TOKENS")], Expect("a", finish="length")),
        ([_gemini([], "SAFETY")], Expect(finish="content-filter")),
        ([_gemini([], "MALFORMED_FUNCTION_CALL")], Expect(finish="other")),
        ([_gemini([{"text": "a"}])], Expect("a")),
        ([{"error": {"code": 503, "message": "overloaded"}}], Expect(error="overloaded")),
    ],
)
def test_gemini_finish_reasons(payloads: list[Any], expect: Expect) -> None:
    assert_outcome(run_payloads("gemini", payloads), expect)


def test_gemini_usage_counts_cached_tokens() -> None:
    events = run_payloads("gemini", [_gemini([{"text": "a"}], "STOP")])
    (finish,) = [e for e in events if isinstance(e, FinishStep)]
    assert finish.usage.cache_read_tokens == 4


def test_gemini_streamed_call_without_finish_is_never_emitted() -> None:
    start = _gemini([{"functionCall": {"name": "f", "willContinue": True}}])
    events = run_payloads("gemini", [start])
    assert [type(e) for e in events][:1] == [ToolInputStart]
    assert_outcome(events, Expect())


def test_converse_reasoning_signature_and_late_eof_finish() -> None:
    lines = (FIXTURES / "bedrock/converse-stream-reasoning-vercel-ai.jsonl").read_text()
    payloads = [msgspec.json.decode(line) for line in lines.splitlines()]
    events = run_payloads("bedrock-converse", payloads[:-1])
    (end,) = [e for e in events if isinstance(e, ReasoningEnd)]
    assert (end.signature or "").startswith("Ep0CCkgICxAB")
    assert_outcome(events, Expect("There are **3** r's", "3 r's", finish="stop", usage=usage(0, 0)))


def test_converse_tool_use() -> None:
    payloads = [
        {
            "contentBlockStart": {
                "contentBlockIndex": 1,
                "start": {"toolUse": {"toolUseId": "t9", "name": "f"}},
            }
        },
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"a":'}}}},
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "1}"}}}},
        {"contentBlockStop": {"contentBlockIndex": 1}},
        {"messageStop": {"stopReason": "tool_use"}},
        {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 2}}},
    ]
    expect = Expect(tools=(("t9", "f", {"a": 1}),), finish="tool-calls", terminal="messageStop")
    assert_outcome(run_payloads("bedrock-converse", payloads), expect)


def test_eventstream_decodes_to_the_derived_payloads() -> None:
    derived = (
        FIXTURES / "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.decoded.jsonl"
    )
    lines = [msgspec.json.decode(line) for line in derived.read_text().splitlines()]
    assert decode_eventstream(EVENTSTREAM.read_bytes()) == [line["decoded_bytes"] for line in lines]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:5] + bytes([b[5] ^ 1]) + b[6:],  # prelude
        lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:],  # headers: message CRC
        lambda b: b[:-1],  # truncated last frame
    ],
)
def test_eventstream_rejects_corruption(mutate: Any) -> None:
    with pytest.raises(AdapterError):
        decode_eventstream(mutate(EVENTSTREAM.read_bytes()))


def test_eventstream_exception_frame_becomes_stream_error() -> None:
    headers = b"".join(
        bytes([len(k)]) + k + b"\x07" + struct.pack(">H", len(v)) + v
        for k, v in [(b":message-type", b"exception"), (b":exception-type", b"throttlingException")]
    )
    frame = _frame(headers, b'{"message":"slow down"}')
    (payload,) = decode_eventstream(frame)
    assert_outcome(run_payloads("bedrock", [payload]), Expect(error="slow down"))
    assert_outcome(run_payloads("bedrock-converse", [payload]), Expect(error="slow down"))


def _frame(headers: bytes, payload: bytes) -> bytes:
    total = 16 + len(headers) + len(payload)
    prelude = struct.pack(">II", total, len(headers))
    body = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + payload
    return body + struct.pack(">I", binascii.crc32(body))
