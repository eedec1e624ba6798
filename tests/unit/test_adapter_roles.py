"""Each row of events/adapters/event_kinds.py fed to its adapter does what its role says.

`ignored` rows emit nothing and leave the attempt open; `error` rows end it with a `StreamError`;
`terminal` and `finish` rows emit the proof and the finish. `content` rows are the fixtures' work
(test_adapters_*.py), where real streams give them something to carry.
"""

from __future__ import annotations

import binascii
import struct
from typing import Any

import pytest

from terminus.events.adapters import AttemptContext, make_adapter
from terminus.events.adapters.event_kinds import (
    ANTHROPIC_BLOCKS,
    ANTHROPIC_DELTAS,
    ANTHROPIC_EVENTS,
    CHAT_DELTA_FIELDS,
    CONVERSE_EVENTS,
    GEMINI_PART_FIELDS,
    INVOKE_STREAM_EVENTS,
    RESPONSES_EVENTS,
    Role,
)
from terminus.events.inbound import FinishStep, InboundEvent, ProviderTerminal, StreamError

CTX = AttemptContext(session_id="s", turn_id="t")


def rows(table: dict[str, Role], *roles: Role) -> list[str]:
    return sorted(kind for kind, role in table.items() if role in roles)


def feed(provider: str, *payloads: Any) -> tuple[list[InboundEvent], bool]:
    adapter = make_adapter(provider, CTX)
    events = [event for payload in payloads for event in adapter.feed_payload(payload)]
    return events, getattr(adapter, "failed", False)


def kinds(events: list[InboundEvent]) -> list[type[InboundEvent]]:
    return [type(e) for e in events]


@pytest.mark.parametrize("kind", rows(ANTHROPIC_EVENTS, "ignored"))
def test_anthropic_ignored_events(kind: str) -> None:
    assert feed("anthropic", {"type": kind}) == ([], False)


def test_anthropic_error_terminal_and_finish_events() -> None:
    assert rows(ANTHROPIC_EVENTS, "error", "terminal", "finish") == [
        "error",
        "message_delta",
        "message_stop",
    ]
    error, _ = feed("anthropic", {"type": "error", "error": {"type": "api_error", "message": "x"}})
    assert kinds(error) == [StreamError]
    finish, _ = feed("anthropic", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
    assert kinds(finish) == [FinishStep]
    assert kinds(feed("anthropic", {"type": "message_stop"})[0]) == [ProviderTerminal]


@pytest.mark.parametrize("block", rows(ANTHROPIC_BLOCKS, "ignored"))
def test_anthropic_ignored_blocks(block: str) -> None:
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": block}}
    stop = {"type": "content_block_stop", "index": 0}
    assert feed("anthropic", start, stop) == ([], False)


@pytest.mark.parametrize("delta", rows(ANTHROPIC_DELTAS, "ignored"))
def test_anthropic_ignored_deltas(delta: str) -> None:
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    events, failed = feed(
        "anthropic", start, {"type": "content_block_delta", "index": 0, "delta": {"type": delta}}
    )
    assert (len(events), failed) == (1, False)  # the block's start only


@pytest.mark.parametrize("kind", rows(RESPONSES_EVENTS, "ignored"))
def test_responses_ignored_events(kind: str) -> None:
    assert feed("openai-responses", {"type": kind, "item_id": "i", "delta": "x"}) == ([], False)


@pytest.mark.parametrize("kind", rows(RESPONSES_EVENTS, "error"))
def test_responses_error_events(kind: str) -> None:
    events, failed = feed("openai-responses", {"type": kind, "message": "x", "response": {}})
    assert (kinds(events), failed) == ([StreamError], True)


@pytest.mark.parametrize("kind", rows(RESPONSES_EVENTS, "terminal"))
def test_responses_terminal_events(kind: str) -> None:
    events, _ = feed("openai-responses", {"type": kind, "response": {"status": "x"}})
    assert kinds(events) == [FinishStep, ProviderTerminal]


@pytest.mark.parametrize("field", rows(CHAT_DELTA_FIELDS, "ignored"))
def test_chat_ignored_delta_fields(field: str) -> None:
    chunk = {"choices": [{"index": 0, "delta": {field: {"id": "a", "data": "x"}}}]}
    assert feed("openai-chat", chunk) == ([], False)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


@pytest.mark.parametrize("field", rows(GEMINI_PART_FIELDS, "ignored"))
def test_gemini_ignored_part_fields(field: str) -> None:
    chunk = {"candidates": [{"index": 0, "content": {"parts": [{camel(field): {"x": 1}}]}}]}
    assert feed("gemini", chunk) == ([], False)


@pytest.mark.parametrize("kind", rows(CONVERSE_EVENTS, "ignored"))
def test_converse_ignored_events(kind: str) -> None:
    assert feed("bedrock-converse", {kind: {"role": "assistant"}}) == ([], False)


@pytest.mark.parametrize("kind", rows(CONVERSE_EVENTS, "error"))
def test_converse_error_events(kind: str) -> None:
    events, failed = feed("bedrock-converse", {kind: {"message": "x"}})
    assert (kinds(events), failed) == ([StreamError], True)


def test_converse_finish_then_terminal() -> None:
    assert rows(CONVERSE_EVENTS, "finish", "terminal") == ["messageStop", "metadata"]
    stop = {"messageStop": {"stopReason": "end_turn"}}
    assert feed("bedrock-converse", stop) == ([], False)  # usage comes with `metadata`
    events, _ = feed("bedrock-converse", stop, {"metadata": {"usage": {}}})
    assert kinds(events) == [FinishStep, ProviderTerminal]


def exception_frame(kind: str) -> bytes:
    headers = b"".join(
        bytes([len(k)]) + k + b"\x07" + struct.pack(">H", len(v)) + v
        for k, v in [(b":message-type", b"exception"), (b":exception-type", kind.encode())]
    )
    payload = b'{"message":"x"}'
    prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
    body = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + payload
    return body + struct.pack(">I", binascii.crc32(body))


@pytest.mark.parametrize("kind", rows(INVOKE_STREAM_EVENTS, "error"))
@pytest.mark.parametrize("provider", ["bedrock", "bedrock-converse"])
def test_bedrock_exception_frames(kind: str, provider: str) -> None:
    adapter = make_adapter(provider, CTX)
    events = adapter.feed_bytes(exception_frame(kind)) + adapter.close()
    assert kinds(events) == [StreamError]
