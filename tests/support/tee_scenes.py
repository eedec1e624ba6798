"""The scenes a teed producer plays against the fake provider (tests/support/fake_provider.py): a
clean answer, a cut then a retry, a 429 then a retry, and a provider overloaded until the attempts
run out, each provider with its own answer and its own error bodies; each scene with the same
bytes as `terminus simulate`'s files, and the frame comparison that leaves out what only a live
producer has (cursors, its clock, where its network reads fell). Used by the Python tee's tests
and the Node producer's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from terminus.events.outbound import (
    AgentError,
    AgentMessageChunk,
    AgentThoughtChunk,
    Retrying,
    SessionUpdate,
)
from tests.support.fake_provider import Reply

STREAMS: Final = Path(__file__).parents[1] / "fixtures/provider-streams"
SSE: Final = {"content-type": "text/event-stream"}
JSON: Final = {"content-type": "application/json"}


def sse(path: str) -> bytes:
    return (STREAMS / path).read_bytes().rstrip(b"\r\n") + b"\n\n"


class Failure(NamedTuple):
    """A provider's error answer: sent by the fake provider, recorded for simulate."""

    status: int
    headers: dict[str, str]
    body: bytes

    def reply(self) -> Reply:
        return Reply(self.status, self.body, self.headers)

    def recorded(self, path: Path) -> Path:
        body = json.loads(self.body)
        path.write_text(
            json.dumps({"status_code": self.status, "headers": self.headers, "body": body})
        )
        return path


ANTHROPIC_RATE = Failure(
    429,
    {**JSON, "retry-after": "0", "x-should-retry": "true"},
    b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
)
ANTHROPIC_OVERLOADED = Failure(
    529,
    {**JSON, "retry-after": "0"},
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
)
# OpenAI's error-codes guide: 429 "Rate limit reached for requests", 503 "The engine is currently
# overloaded, please try again later"; the body is its `{"error": {...}}` object.
OPENAI_RATE = Failure(
    429,
    {**JSON, "retry-after": "0"},
    b'{"error":{"message":"Rate limit reached for requests","type":"requests",'
    b'"param":null,"code":"rate_limit_exceeded"}}',
)
OPENAI_OVERLOADED = Failure(
    503,
    {**JSON, "retry-after": "0"},
    b'{"error":{"message":"The engine is currently overloaded, please try again later",'
    b'"type":"server_error","param":null,"code":null}}',
)
# Google's own bodies (google.rpc.Status in `error`), from the fixtures: a 429 RESOURCE_EXHAUSTED
# with no RetryInfo (the workers' backoff decides the wait) and a 503 UNAVAILABLE, byte for byte.
GEMINI_RATE = Failure(
    429,
    {"content-type": "application/json; charset=UTF-8"},
    (STREAMS / "gemini/quota-exceeded-429-vertex-firebase-testdata.json").read_bytes(),
)
GEMINI_UNAVAILABLE = Failure(
    503,
    {"content-type": "application/json; charset=UTF-8"},
    json.loads(
        (STREAMS / "gemini/unavailable-503-high-demand-continue-issue-10639.json").read_text()
    )["body"].encode(),
)


class Answers(NamedTuple):
    """One provider's streamed answer and error answers, as the fake provider sends them."""

    provider: str  # terminus's adapter for them
    answer: bytes
    rate_limited: Failure
    overloaded: Failure


PROVIDERS: Final = {
    "anthropic": Answers(
        "anthropic",
        sse("anthropic/text-recorded-fantasy.sse"),
        ANTHROPIC_RATE,
        ANTHROPIC_OVERLOADED,
    ),
    "openai-chat": Answers(
        "openai-chat",
        sse("openai-chat/text-stop-usage-done-recorded-fantasy.sse"),
        OPENAI_RATE,
        OPENAI_OVERLOADED,
    ),
    "gemini": Answers(
        "gemini",
        sse("gemini/multi-chunk-text-recorded-fantasy.sse"),
        GEMINI_RATE,
        GEMINI_UNAVAILABLE,
    ),
}
OVERLOADED_ATTEMPTS: Final = 3  # the workers' default cap


def comparable(frame: SessionUpdate) -> SessionUpdate:
    """The frame without its cursor, and an error's reset time (the producer's clock plus the
    delay, where simulate's clock is 0) without the clock."""
    frame = msgspec.structs.replace(frame, cursor=None)
    if isinstance(frame, Retrying | AgentError) and frame.error is not None:
        error = msgspec.structs.replace(frame.error, reset_at_epoch_ms=None)
        frame = msgspec.structs.replace(frame, error=error)
    return frame


def comparable_frames(frames: list[SessionUpdate]) -> list[SessionUpdate]:
    """Each frame `comparable`, and each run of one part's deltas as one delta of their text: a
    live producer publishes a network read's deltas of a part as one event (`coalesce_reads`,
    the default), where simulate, which knows no reads, makes one per provider event."""
    joined: list[SessionUpdate] = []
    for frame in map(comparable, frames):
        last = joined[-1] if joined else None
        if (
            isinstance(frame, AgentMessageChunk | AgentThoughtChunk)
            and isinstance(last, AgentMessageChunk | AgentThoughtChunk)
            and msgspec.structs.replace(last, delta="") == msgspec.structs.replace(frame, delta="")
        ):
            joined[-1] = msgspec.structs.replace(frame, delta=last.delta + frame.delta)
        else:
            joined.append(frame)
    return joined


def scenario(scene: str, answers: Answers, tmp_path: Path) -> tuple[list[Reply], list[Path]]:
    """The fake provider's replies for a scene (`clean`, `cut`, `429` or `overloaded`), and the
    same bytes as simulate's files."""
    answer = answers.answer
    whole = tmp_path / "whole.sse"
    whole.write_bytes(answer)
    if scene == "clean":
        return [Reply(200, answer, SSE)], [whole]
    if scene == "cut":
        cut = tmp_path / "cut.sse"
        cut.write_bytes(answer[: len(answer) // 2])
        return [Reply(200, answer, SSE, cut_at=len(answer) // 2), Reply(200, answer, SSE)], [
            cut,
            whole,
        ]
    if scene == "overloaded":
        busy = answers.overloaded
        error = busy.recorded(tmp_path / "overloaded.json")
        return [busy.reply()] * OVERLOADED_ATTEMPTS, [error] * OVERLOADED_ATTEMPTS
    if scene != "429":
        raise ValueError(f"no scene {scene!r}")
    error = answers.rate_limited.recorded(tmp_path / "429.json")
    return [answers.rate_limited.reply(), Reply(200, answer, SSE)], [error, whole]
