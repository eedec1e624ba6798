"""The building blocks of the OpenAPI document's operations: answers (JSON, text, the
refusals every guarded route shares), headers and parameters."""

from __future__ import annotations

from typing import Any, Final

Operation = dict[str, Any]
Security = list[dict[str, list[str]]]

SECURITY: Final[Security] = [{"bearer": []}, {"cookie": []}, {"queryToken": []}]
WRITE_SECURITY: Final[Security] = [{"bearer": []}]  # the cookie and ?token= authorise reads only


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_answer(description: str, schema: str, headers: dict[str, Any] | None = None) -> Operation:
    answer: Operation = {
        "description": description,
        "content": {"application/json": {"schema": ref(schema)}},
    }
    return answer | ({"headers": headers} if headers else {})


def text_answer(description: str, media_type: str) -> Operation:
    return {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}


def problem(description: str, retry_after: bool = False) -> Operation:
    return json_answer(description, "Problem", RETRY_AFTER if retry_after else None)


RETRY_AFTER: Final = {
    "Retry-After": {
        "description": "seconds to wait before asking again",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }
}
SET_COOKIE: Final = {
    "Set-Cookie": {
        "description": "terminus_token; HttpOnly; SameSite=Strict; Path=/ (Secure over https)",
        "required": True,
        "schema": {"type": "string"},
    }
}
UNAUTHORIZED: Final = problem("no token, or a malformed, forged or expired one")
TOO_LARGE: Final = problem("the request has a body: no route takes one")
UNREACHABLE: Final = problem(
    "Redis cannot be reached now, or refuses the gateway's ACL user a command it needs (an "
    "operator must grant it: the gateway logs which)",
    retry_after=True,
)
OTHER_SESSION: Final = problem("a token for another session, or an operator token")
NOT_OPERATOR: Final = problem("a session token: an operator token is required")
ARCHIVED: Final = problem("archived by retention (operator tokens only: a session gets 404)")
UNREADABLE: Final = problem("the turn's stored snapshot cannot be read")
BAD_LENGTH: Final = "a Content-Length that is not a non-negative integer"


def bad_request(*reasons: str) -> Operation:
    """A 400: what the route reads of the request (every guarded route reads Content-Length,
    which an ASGI server other than uvicorn may pass on unchecked)."""
    return problem(", or ".join([*reasons, BAD_LENGTH]))


def path_parameter(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def query_parameter(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    schema = {"type": kind} | ({"minimum": 0} if kind == "integer" else {})
    return {"name": name, "in": "query", "required": False, "description": description} | {
        "schema": schema
    }


SESSION_ID: Final = path_parameter("session_id", "the session")
TURN_ID: Final = path_parameter("turn_id", "the turn")
LAST_EVENT_ID: Final = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "the last cursor received",
    "schema": {"type": "string"},
}
