"""The OpenAPI 3.1 document of the HTTP gateway (service/gateway/routes.py, inspector.py).

The paths are written here as data, each operation with every status it can answer and that
answer's body. Tests hold it to the gateway both ways: a route missing here, or a path here the
app lacks, fails tests/unit/test_contract.py; a status a route answers that is not here, or one
here that no route answers, fails the route probes (service/conformance, which
`terminus contract --check` runs too)."""

from __future__ import annotations

from typing import Any, Final

from terminus.events.versions import CURRENT
from terminus.service.contract import ui_routes
from terminus.service.contract.answers import (
    ARCHIVED,
    LAST_EVENT_ID,
    NOT_OPERATOR,
    OTHER_SESSION,
    SECURITY,
    SESSION_ID,
    SET_COOKIE,
    TOO_LARGE,
    TURN_ID,
    UNAUTHORIZED,
    UNREACHABLE,
    UNREADABLE,
    WRITE_SECURITY,
    Operation,
    bad_request,
    json_answer,
    path_parameter,
    problem,
    query_parameter,
    text_answer,
)
from terminus.service.gateway.inspector import DEFAULT_TURNS, MAX_TURNS
from terminus.service.gateway.routes import MAX_LIMIT


def _updates() -> Operation:
    return {
        "summary": "Follow a session: one Server-Sent Event per frame",
        "description": "`id:` is the frame's cursor, `event:` its kind (`sessionUpdate`), "
        "`data:` the frame's JSON as the workers stored it (components.schemas.SessionUpdate). "
        "Resume with `Last-Event-ID` or `?from=`: every later frame, none twice. Comment pings "
        "keep proxies from closing an idle stream. While Redis is unreachable a new stream is "
        "answered 503 with `Retry-After`, as every other route is; once the stream has begun, "
        "Redis going away ends it (the client resumes).",
        "parameters": [
            SESSION_ID,
            LAST_EVENT_ID,
            query_parameter("from", "a cursor to resume after (as Last-Event-ID)"),
            query_parameter(
                "until_end",
                "end the stream after the first turn_finished or agent_error",
                "boolean",
            ),
            query_parameter(
                "until_turn",
                "end the stream once this turn has ended (turn_finished or agent_error)",
            ),
            query_parameter(
                "token", "a session token, for an EventSource that cannot send headers"
            ),
        ],
        "responses": {
            "200": text_answer("the frames, as Server-Sent Events", "text/event-stream"),
            "400": bad_request("a malformed cursor"),
            "401": UNAUTHORIZED,
            "403": OTHER_SESSION,
            "413": TOO_LARGE,
            "429": problem("too many streams opened or held by this token", retry_after=True),
            "503": UNREACHABLE,
        },
        "security": SECURITY,
    }


def _messages() -> Operation:
    return {
        "summary": "The session's persisted messages, in commit order",
        "parameters": [
            SESSION_ID,
            query_parameter("offset", "first message", "integer"),
            query_parameter("limit", f"at most this many (at most {MAX_LIMIT})", "integer"),
        ],
        "responses": {
            "200": json_answer("a page of messages", "MessagesPage"),
            "400": bad_request("offset or limit is not a non-negative integer"),
            "401": UNAUTHORIZED,
            "403": OTHER_SESSION,
            "413": TOO_LARGE,
            "503": UNREACHABLE,
        },
        "security": SECURITY,
    }


def _turn() -> Operation:
    return {
        "summary": "A turn's state machine as stored: state, attempts, position",
        "description": "A session token reads the turns of its own session only: any other "
        "turn is 404, so it learns no other session's ids.",
        "parameters": [TURN_ID, query_parameter("session", "the turn's session (operator tokens)")],
        "responses": {
            "200": json_answer("the turn", "Turn"),
            "400": bad_request("an operator token without ?session="),
            "401": UNAUTHORIZED,
            "403": problem("a producer token: it reads nothing"),
            "404": problem("no such turn in the session"),
            "410": ARCHIVED,
            "413": TOO_LARGE,
            "500": UNREADABLE,
            "503": UNREACHABLE,
        },
        "security": SECURITY,
    }


def _cancel() -> Operation:
    return {
        "summary": "Cancel a live turn (a user's Stop)",
        "description": "The open attempt's parts are discarded, the turn ends `cancelled` "
        "with one turn_finished, and the producer's runner stops its provider request. A "
        "session token of this session, or an operator token.",
        "parameters": [SESSION_ID, TURN_ID, query_parameter("reason", "recorded with the cancel")],
        "responses": {
            "202": json_answer("the cancel is in the turn's log", "CancelAccepted"),
            "400": bad_request(),
            "401": problem(
                "no Bearer token (a cookie or ?token= authorises reads only), or a bad one"
            ),
            "403": problem("a token for another session"),
            "404": problem("no such live turn in this session"),
            "409": json_answer("the turn has ended (with its state)", "CancelRefused"),
            "413": TOO_LARGE,
            "503": UNREACHABLE,
        },
        "security": WRITE_SECURITY,
    }


PRODUCER_SECURITY: Final = WRITE_SECURITY  # a producer token (terminus token --producer)
NOT_PRODUCER: Final = problem(
    "not a producer token (terminus token --producer), or one of another session"
)
PRODUCER_RATE: Final = problem("too many requests for this producer token", retry_after=True)
ENDED: Final = problem("the turn has ended, or its id is another session's turn")


def _attempts() -> Operation:
    return {
        "summary": "Publish one attempt: the provider's raw response streamed as the body",
        "description": "Headers: `x-terminus-provider` (as `terminus publish --provider`, "
        "`openai-chat:<compat>` included), optional `x-terminus-model`, `x-terminus-step`, "
        "`x-terminus-attempt`, `x-terminus-max-attempts`; `Content-Encoding` of the provider's "
        "bytes. A non-2xx upstream answer: `x-terminus-upstream-status` and each provider header "
        "as `x-terminus-upstream-header-<name>`, the body its error body. No answer at all: "
        "`x-terminus-transport-error`. The turn's first attempt starts the turn. Answered once "
        'the attempt is published (docs/producers.md, "Producers over HTTP").',
        "parameters": [SESSION_ID, TURN_ID],
        "responses": {
            "200": json_answer("the attempt is published", "AttemptPublished"),
            "400": problem("a header of the attempt's form is missing or malformed"),
            "401": UNAUTHORIZED,
            "403": NOT_PRODUCER,
            "404": problem("a next attempt of a turn the workers have not seen"),
            "409": ENDED,
            "429": PRODUCER_RATE,
            "503": UNREACHABLE,
        },
        "security": PRODUCER_SECURITY,
    }


def _turn_events() -> Operation:
    return {
        "summary": "Publish tool results or errors, or the turn's end, between attempts",
        "description": 'A JSON body `{"events": [...], "next_seq": N}`, each event a '
        "`tool-result` {tool_call_id, output}, a `tool-error` {tool_call_id, error} or a "
        "`turn-ended` {reason}, published as the current attempt's next ones.",
        "parameters": [SESSION_ID, TURN_ID],
        "responses": {
            "200": json_answer("the events are published", "EventsPublished"),
            "400": problem("not a list of events this route publishes"),
            "401": UNAUTHORIZED,
            "403": NOT_PRODUCER,
            "404": problem("no such turn in this session"),
            "409": ENDED,
            "429": PRODUCER_RATE,
            "503": UNREACHABLE,
        },
        "security": PRODUCER_SECURITY,
    }


def _commands() -> Operation:
    return {
        "summary": "The turn's producer commands (the workers' decisions) as Server-Sent Events",
        "description": "`id:` the command's entry id, `event:` its type, `data:` its JSON "
        '(docs/producers.md, "The commands stream"). Starts after `from` (an attempt\'s '
        "`commands_from`) or `Last-Event-ID`, else at the end; ends after `turn_concluded` or "
        "`turn_refused`, or after the first command with `until_decision=1`.",
        "parameters": [
            SESSION_ID,
            TURN_ID,
            LAST_EVENT_ID,
            query_parameter("from", "an entry id to read after (as Last-Event-ID)"),
            query_parameter("until_decision", "end after the first command", "boolean"),
        ],
        "responses": {
            "200": text_answer("the commands, as Server-Sent Events", "text/event-stream"),
            "400": problem("a malformed cursor"),
            "401": UNAUTHORIZED,
            "403": NOT_PRODUCER,
            "429": problem(
                "too many requests or streams for this producer token", retry_after=True
            ),
            "503": UNREACHABLE,
        },
        "security": PRODUCER_SECURITY,
    }


def _timeline() -> Operation:
    return {
        "summary": "A turn's timeline for the inspector: snapshot, state changes, frames",
        "parameters": [
            TURN_ID,
            query_parameter("session", "the turn's session; an operator may leave it out"),
        ],
        "responses": {
            "200": json_answer("the timeline", "Timeline"),
            "400": bad_request(),
            "401": UNAUTHORIZED,
            "403": problem("a session token naming another session in ?session="),
            "404": problem("no such turn (for a session token: in its session)"),
            "410": ARCHIVED,
            "413": TOO_LARGE,
            "500": UNREADABLE,
            "503": UNREACHABLE,
        },
        "security": SECURITY,
    }


def _recent_turns() -> Operation:
    return {
        "summary": "The turns that changed state last, newest first (operator)",
        "parameters": [
            query_parameter("limit", f"at most {MAX_TURNS} (default {DEFAULT_TURNS})", "integer")
        ],
        "responses": {
            "200": json_answer("the turns", "RecentTurns"),
            "400": bad_request("limit is not a non-negative integer"),
            "401": UNAUTHORIZED,
            "403": NOT_OPERATOR,
            "413": TOO_LARGE,
            "503": UNREACHABLE,
        },
        "security": SECURITY,
    }


def _cookie() -> dict[str, Operation]:
    return {
        "post": {
            "summary": "Sign this browser in: an HttpOnly cookie from a Bearer token",
            "responses": {
                "204": {"description": "signed in", "headers": SET_COOKIE},
                "400": bad_request(),
                "401": problem("no Bearer token, or a malformed, forged or expired one"),
                "403": problem("a producer token: it reads nothing, so signs no browser in"),
                "413": TOO_LARGE,
            },
            "security": WRITE_SECURITY,
        },
        "get": {
            "summary": "Whether the cookie signs this browser in, and as whom",
            "responses": {"200": json_answer("signed in or not, 200 either way", "SignedIn")},
        },
        "delete": {
            "summary": "Sign out",
            "responses": {"204": {"description": "signed out", "headers": SET_COOKIE}},
        },
    }


def _health() -> Operation:
    return {
        "summary": "Whether Redis answers",
        "responses": {
            "200": json_answer("Redis answers", "Health"),
            "503": json_answer("Redis does not answer (the error)", "Health"),
        },
    }


def _metrics() -> Operation:
    return {
        "summary": "Prometheus text exposition (operator; docs/metrics.md)",
        "responses": {
            "200": text_answer("the metrics", "text/plain"),
            "400": bad_request(),
            "401": UNAUTHORIZED,
            "403": NOT_OPERATOR,
            "413": TOO_LARGE,
            "503": UNREACHABLE,
        },
        "security": SECURITY,
    }


def _file(summary: str, media_type: str) -> Operation:
    return {"summary": summary, "responses": {"200": text_answer("the file", media_type)}}


def _static() -> Operation:
    return {
        "summary": "The inspector page's script and style (files of the gateway package)",
        "parameters": [path_parameter("path", "the file's name")],
        "responses": {
            "200": {"description": "the file", "content": {"*/*": {}}},
            "304": {"description": "not modified since the If-None-Match/If-Modified-Since"},
            "404": text_answer("no such file", "text/plain"),
        },
    }


def paths() -> dict[str, dict[str, Operation]]:
    """Every route of the gateway: path -> method -> operation."""
    return {
        "/v1/sessions/{session_id}/updates": {"get": _updates()},
        "/v1/sessions/{session_id}/messages": {"get": _messages()},
        "/v1/sessions/{session_id}/ui-message-stream": {"get": ui_routes.open_turn_stream()},
        "/v1/sessions/{session_id}/turns/{turn_id}/ui-message-stream": {
            "get": ui_routes.turn_stream()
        },
        "/v1/turns/{turn_id}": {"get": _turn()},
        "/v1/sessions/{session_id}/turns/{turn_id}/cancel": {"post": _cancel()},
        "/v1/sessions/{session_id}/turns/{turn_id}/attempts": {"post": _attempts()},
        "/v1/sessions/{session_id}/turns/{turn_id}/events": {"post": _turn_events()},
        "/v1/sessions/{session_id}/turns/{turn_id}/commands": {"get": _commands()},
        "/v1/turns/{turn_id}/timeline": {"get": _timeline()},
        "/v1/admin/turns": {"get": _recent_turns()},
        "/v1/session-cookie": _cookie(),
        "/healthz": {"get": _health()},
        "/metrics": {"get": _metrics()},
        "/inspect": {"get": _file("The inspector page", "text/html")},
        "/inspect/diagram.svg": {"get": _file("The turn state diagram", "image/svg+xml")},
        "/inspect/states.css": {"get": _file("One colour per state", "text/css")},
        "/inspect/static/{path}": {"get": _static()},
    }


def openapi(schemas: dict[str, Any]) -> dict[str, Any]:
    """The document, its bodies referring to `schemas` (components.schemas)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "terminus gateway",
            "version": str(CURRENT),
            "description": "What frontends read over HTTP and Server-Sent Events, a user's "
            "Stop, and what producers publish over HTTP. Tokens are scoped to one session, to "
            "one session's producer, or an operator's (terminus token). Every answer also "
            "carries `Referrer-Policy: no-referrer`.",
        },
        "paths": paths(),
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "terminus_token"},
                "queryToken": {"type": "apiKey", "in": "query", "name": "token"},
            },
        },
    }
