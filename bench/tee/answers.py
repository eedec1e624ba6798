"""Large streamed answers of `deltas` text deltas, in each provider's own SSE shape (the shapes
of the recorded fixtures in tests/fixtures/provider-streams), and the text they carry."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple


class Answer(NamedTuple):
    body: bytes
    text: str


def _pieces(deltas: int) -> Iterator[str]:
    return (f" word{i % 97}" for i in range(deltas))


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _data(data: dict[str, Any] | str, end: str = "\n\n") -> str:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}{end}"


def _typed(kind: str, **fields: Any) -> str:
    """An Anthropic event: its SSE name is its `type`."""
    return _event(kind, {"type": kind, **fields})


def anthropic(deltas: int) -> Answer:
    usage = {"input_tokens": 16, "output_tokens": 1}
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-x"}
    start: dict[str, Any] = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    pieces = list(_pieces(deltas))
    parts = [
        _typed("message_start", message=start),
        _typed("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    ]
    for piece in pieces:
        delta = {"type": "text_delta", "text": piece}
        parts.append(_typed("content_block_delta", index=0, delta=delta))
    end = {"stop_reason": "end_turn", "stop_sequence": None}
    parts += [
        _typed("content_block_stop", index=0),
        _typed("message_delta", delta=end, usage={"output_tokens": deltas}),
        _typed("message_stop"),
    ]
    return Answer("".join(parts).encode(), "".join(pieces))


def openai_chat(deltas: int) -> Answer:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _data(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gpt-x",
                "choices": [choice],
                "usage": None,
            }
        )

    pieces = list(_pieces(deltas))
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": piece}) for piece in pieces]
    parts.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 20, "completion_tokens": deltas, "total_tokens": 20 + deltas}
    parts.append(
        _data(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gpt-x",
                "choices": [],
                "usage": usage,
            }
        )
    )
    parts.append(_data("[DONE]"))
    return Answer("".join(parts).encode(), "".join(pieces))


def gemini(deltas: int) -> Answer:
    """`alt=sse`, with CRLF line ends as Google sends them; the last chunk has the finish."""

    def chunk(text: str, last: bool) -> str:
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "index": 0,
        }
        data: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-x"}
        if last:
            candidate["finishReason"] = "STOP"
            data["usageMetadata"] = {
                "promptTokenCount": 4,
                "candidatesTokenCount": deltas,
                "totalTokenCount": 4 + deltas,
            }
        return _data(data, "\r\n\r\n")

    pieces = list(_pieces(deltas))
    parts = [chunk(piece, i == len(pieces) - 1) for i, piece in enumerate(pieces)]
    return Answer("".join(parts).encode(), "".join(pieces))


ANSWERS: dict[str, Callable[[int], Answer]] = {
    "anthropic": anthropic,
    "openai": openai_chat,
    "google-genai": gemini,
}
