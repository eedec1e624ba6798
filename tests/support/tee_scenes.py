"""The scenes a teed SDK plays against the fake provider (tests/support/fake_provider.py): a clean
answer, a cut then a retry, a 429 then a retry, and a provider overloaded until the attempts run
out; each with the same bytes as `terminus simulate`'s files, and the frame comparison that
leaves out what only a live producer has (cursors, its clock). Used by the Python tee's tests and
the Node producer's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import msgspec

from terminus.events.outbound import AgentError, Retrying, SessionUpdate
from tests.support.fake_provider import Reply

STREAMS: Final = Path(__file__).parents[1] / "fixtures/provider-streams"
SSE: Final = {"content-type": "text/event-stream"}


def sse(path: str) -> bytes:
    return (STREAMS / path).read_bytes().rstrip(b"\r\n") + b"\n\n"


ANTHROPIC: Final = sse("anthropic/text-recorded-fantasy.sse")
OPENAI_CHAT: Final = sse("openai-chat/text-stop-usage-done-recorded-fantasy.sse")
RATE_LIMITED: Final = {
    "content-type": "application/json",
    "retry-after": "0",
    "x-should-retry": "true",
}
RATE_BODY: Final = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
OVERLOADED: Final = {"content-type": "application/json", "retry-after": "0"}
OVERLOADED_BODY: Final = (
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
)
OVERLOADED_ATTEMPTS: Final = 3  # the workers' default cap


def comparable(frame: SessionUpdate) -> SessionUpdate:
    """The frame without its cursor, and an error's reset time (the producer's clock plus the
    delay, where simulate's clock is 0) without the clock."""
    frame = msgspec.structs.replace(frame, cursor=None)
    if isinstance(frame, Retrying | AgentError) and frame.error is not None:
        error = msgspec.structs.replace(frame.error, reset_at_epoch_ms=None)
        frame = msgspec.structs.replace(frame, error=error)
    return frame


def scenario(name: str, answer: bytes, tmp_path: Path) -> tuple[list[Reply], list[Path]]:
    """The fake provider's replies for a scene, and the same bytes as simulate's files."""
    whole = tmp_path / "whole.sse"
    whole.write_bytes(answer)
    if name == "clean":
        return [Reply(200, answer, SSE)], [whole]
    if name == "cut":
        cut = tmp_path / "cut.sse"
        cut.write_bytes(answer[: len(answer) // 2])
        return [Reply(200, answer, SSE, cut_at=len(answer) // 2), Reply(200, answer, SSE)], [
            cut,
            whole,
        ]
    if name == "529":
        error = tmp_path / "529.json"
        body = json.loads(OVERLOADED_BODY)
        error.write_text(json.dumps({"status_code": 529, "headers": OVERLOADED, "body": body}))
        replies = [Reply(529, OVERLOADED_BODY, OVERLOADED)] * OVERLOADED_ATTEMPTS
        return replies, [error] * OVERLOADED_ATTEMPTS
    error = tmp_path / "429.json"
    recorded = {"status_code": 429, "headers": RATE_LIMITED, "body": json.loads(RATE_BODY)}
    error.write_text(json.dumps(recorded))
    return [Reply(429, RATE_BODY, RATE_LIMITED), Reply(200, answer, SSE)], [error, whole]
