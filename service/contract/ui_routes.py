"""The OpenAPI operations of the AI SDK UI message stream routes (service/gateway/ui_messages.py).

Their answers are Server-Sent Events whose `data:` is one chunk of the AI SDK's UI message
stream (`uiMessageChunkSchema` of the `ai` package, not terminus's own schema: docs/frontends.md
lists the chunks terminus sends), so the document describes the body as text."""

from __future__ import annotations

from typing import Any, Final

from terminus.service.contract.answers import (
    OTHER_SESSION,
    SECURITY,
    SESSION_ID,
    TOO_LARGE,
    TURN_ID,
    UNAUTHORIZED,
    UNREACHABLE,
    Operation,
    bad_request,
    problem,
    query_parameter,
)

STREAM_HEADER: Final = {
    "x-vercel-ai-ui-message-stream": {
        "description": "v1: the AI SDK's UI message stream protocol",
        "required": True,
        "schema": {"type": "string", "const": "v1"},
    }
}
MODE: Final = query_parameter(
    "mode",
    "`hold` (default): an attempt's parts once it is proven, transient status parts before; "
    "`reset`: live parts, `reset-step` when an attempt is discarded (ai >= 7.0.70 only: "
    "asking for it declares that the client reads it)",
)
_TOKEN: Final[dict[str, Any]] = query_parameter(
    "token", "a session token, for a client that cannot send headers"
)
BAD_MODE: Final = "a mode other than hold or reset"
REPLAY: Final = (
    "Replayed from `start` (`messageId` is the persisted message's id), then live until the "
    "turn ends with `finish`, `error` then `finish`, or `abort`, and `data: [DONE]`. No part "
    "of an attempt the kept frames already discard is sent, in either mode."
)


def _stream(description: str) -> Operation:
    return {
        "description": description,
        "headers": STREAM_HEADER,
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }


def _refusals() -> dict[str, Operation]:
    return {
        "400": bad_request(BAD_MODE),
        "401": UNAUTHORIZED,
        "403": OTHER_SESSION,
        "413": TOO_LARGE,
        "429": problem("too many streams opened or held by this token", retry_after=True),
        "503": UNREACHABLE,
    }


def turn_stream() -> Operation:
    return {
        "summary": "One turn as the AI SDK UI message stream",
        "description": REPLAY + " A turn that has not started yet is waited for.",
        "parameters": [SESSION_ID, TURN_ID, MODE, _TOKEN],
        "responses": {
            "200": _stream("the turn's UI message chunks, as Server-Sent Events"),
            "404": problem("the turn has ended and its frames are no longer kept"),
            **_refusals(),
        },
        "security": SECURITY,
    }


def open_turn_stream() -> Operation:
    return {
        "summary": "The session's open turn as the AI SDK UI message stream (useChat's resume)",
        "description": REPLAY + " The open turn is the one of the session's last frame, "
        "unless that frame ended it.",
        "parameters": [SESSION_ID, MODE, _TOKEN],
        "responses": {
            "200": _stream("the open turn's UI message chunks, as Server-Sent Events"),
            "204": {"description": "no turn of the session is open: nothing to resume"},
            **_refusals(),
        },
        "security": SECURITY,
    }
