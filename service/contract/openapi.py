"""The OpenAPI 3.1 document of the HTTP gateway (service/gateway/routes.py, inspector.py).

The paths are written here as data; a test checks them against the gateway's routes, both
ways, so a route added without its entry here fails the build."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from terminus.events.outbound import PersistedMessage
from terminus.events.versions import CURRENT
from terminus.statemachines.turn import Turn


class MessagesPage(msgspec.Struct, frozen=True):
    """`GET /v1/sessions/{id}/messages`: a page of the session's messages in commit order."""

    messages: list[PersistedMessage]
    next_offset: int | None
    total: int


class CancelAccepted(msgspec.Struct, frozen=True):
    """`POST .../cancel`: the cancel is in the turn's log."""

    cancel: str
    entry_id: str


class Problem(msgspec.Struct, frozen=True):
    """Every refusal: what is wrong, in words."""

    error: str


OPENAPI_TYPES: Final = {
    "MessagesPage": MessagesPage,
    "CancelAccepted": CancelAccepted,
    "Problem": Problem,
    "Turn": Turn,
}
SECURITY: Final[list[dict[str, list[str]]]] = [{"bearer": []}, {"cookie": []}, {"queryToken": []}]
WRITE_SECURITY: Final[list[dict[str, list[str]]]] = [
    {"bearer": []}
]  # the cookie and ?token= authorise reads only


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


def _problem(description: str) -> dict[str, Any]:
    return _json(description, "Problem")


REFUSALS: Final = {
    "401": _problem("no token, or a malformed, forged or expired one"),
    "403": _problem("a token for another session (or not an operator's where one is needed)"),
    "503": _problem("Redis cannot be reached now (with Retry-After: 1)"),
}


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _query(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": kind},
    }


SESSION_ID: Final = _path("session_id", "the session")
TURN_ID: Final = _path("turn_id", "the turn")


def _updates() -> dict[str, Any]:
    return {
        "get": {
            "summary": "Follow a session: one Server-Sent Event per frame",
            "description": "`id:` is the frame's cursor, `event:` its kind (`sessionUpdate`), "
            "`data:` the frame's JSON as the workers stored it (schema SessionUpdate). Resume "
            "with `Last-Event-ID` or `?from=`: every later frame, none twice. Comment pings "
            "keep proxies from closing an idle stream.",
            "parameters": [
                SESSION_ID,
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": False,
                    "description": "the last cursor received",
                    "schema": {"type": "string"},
                },
                _query("from", "a cursor to resume after (as Last-Event-ID)"),
                _query(
                    "until_end",
                    "end the stream after the first turn_finished or agent_error",
                    "boolean",
                ),
                _query(
                    "until_turn",
                    "end the stream once this turn has ended (its turn_finished or agent_error)",
                ),
                _query("token", "a session token, for an EventSource that cannot send headers"),
            ],
            "responses": {
                "200": {
                    "description": "the frames",
                    "content": {"text/event-stream": {"schema": _ref("SessionUpdate")}},
                },
                "400": _problem("a malformed cursor"),
                "429": _problem("too many streams opened or held by this token (Retry-After)"),
                **REFUSALS,
            },
            "security": SECURITY,
        }
    }


def _messages() -> dict[str, Any]:
    return {
        "get": {
            "summary": "The session's persisted messages, in commit order",
            "parameters": [
                SESSION_ID,
                _query("offset", "first message", "integer"),
                _query("limit", "at most this many (at most 1000)", "integer"),
            ],
            "responses": {"200": _json("a page of messages", "MessagesPage"), **REFUSALS},
            "security": SECURITY,
        }
    }


def _turn() -> dict[str, Any]:
    return {
        "get": {
            "summary": "A turn's state machine as stored: state, attempts, position",
            "parameters": [TURN_ID, _query("session", "the turn's session (operator tokens)")],
            "responses": {
                "200": _json("the turn", "Turn"),
                "404": _problem("no such turn in the session"),
                "410": _problem("archived by retention (operator tokens only)"),
                **REFUSALS,
            },
            "security": SECURITY,
        }
    }


def _cancel() -> dict[str, Any]:
    return {
        "post": {
            "summary": "Cancel a live turn (a user's Stop)",
            "description": "The open attempt's parts are discarded, the turn ends `cancelled` "
            "with one turn_finished, and the producer's runner stops its provider request. A "
            "session token of this session, or an operator token.",
            "parameters": [SESSION_ID, TURN_ID, _query("reason", "recorded with the cancel")],
            "responses": {
                "202": _json("the cancel is in the turn's log", "CancelAccepted"),
                "404": _problem("no such live turn in this session"),
                "409": _problem("the turn has ended (with its state)"),
                **REFUSALS,
            },
            "security": WRITE_SECURITY,
        }
    }


def _plain(
    summary: str,
    content: str,
    security: list[dict[str, list[str]]] | None = None,
    method: str = "get",
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": {"description": "OK", "content": {content: {"schema": {}}}}},
    }
    if security is not None:
        operation["security"] = security
    return {method: operation}


def _cookie() -> dict[str, Any]:
    return {
        "post": {
            "summary": "Sign this browser in: an HttpOnly cookie from a Bearer token",
            "responses": {"204": {"description": "signed in"}, **REFUSALS},
            "security": WRITE_SECURITY,
        },
        "get": {
            "summary": "Whether the cookie signs this browser in, and as whom",
            "responses": {
                "200": {
                    "description": "signed_in, admin, expires",
                    "content": {"application/json": {"schema": {}}},
                }
            },
        },
        "delete": {"summary": "Sign out", "responses": {"204": {"description": "signed out"}}},
    }


def openapi(schemas: dict[str, Any]) -> dict[str, Any]:
    """The document, its bodies referring to `schemas` (components.schemas)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "terminus gateway",
            "version": str(CURRENT),
            "description": "What frontends read over HTTP and Server-Sent Events, and a user's "
            "Stop. Tokens are scoped to one session, or an operator's (terminus token).",
        },
        "paths": {
            "/v1/sessions/{session_id}/updates": _updates(),
            "/v1/sessions/{session_id}/messages": _messages(),
            "/v1/turns/{turn_id}": _turn(),
            "/v1/sessions/{session_id}/turns/{turn_id}/cancel": _cancel(),
            "/v1/turns/{turn_id}/timeline": _plain(
                "A turn's timeline for the inspector", "application/json", SECURITY
            ),
            "/v1/admin/turns": _plain("Recent turns (operator)", "application/json", SECURITY),
            "/v1/session-cookie": _cookie(),
            "/healthz": _plain("200 when Redis answers, else 503", "application/json"),
            "/metrics": _plain("Prometheus text (operator)", "text/plain", SECURITY),
            "/inspect": _plain("The inspector page", "text/html"),
            "/inspect/diagram.svg": _plain("The state diagram", "image/svg+xml"),
            "/inspect/states.css": _plain("The state colours", "text/css"),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "terminus_token"},
                "queryToken": {"type": "apiKey", "in": "query", "name": "token"},
            },
        },
    }
