"""Classify a failed attempt into the typed error every subscriber sees (DESIGN section 4).

Evidence, strongest first (docs/design.md, "Classification precedence"):
1. our own `x-llm-error-type` header;
2. a documented message that names the condition (statemachines/error_bodies.py): a budget or
   key error inside a 400, a request larger than the per-minute limit inside a 429, a local
   server's context overflow; its `reason` is kept in the payload, and it decides retryable;
3. a `google.rpc.ErrorInfo` reason in the error's `details` (API_KEY_INVALID inside a 400);
4. the error object's `code`, then its `type`, then `__type`, TGI's `error_type` and Bedrock's
   `x-amzn-errortype` header, then its `status` (statemachines/error_kinds.py): the specific code
   names the condition, the type only its family;
5. the message, for a context overflow that has no code of its own (never on a rate limit);
6. the HTTP status, or the status an in-band error states (OpenRouter's numeric `code`, TGI's
   `http_status_code`);
7. an error inside an accepted stream with nothing else to go on: `provider_unavailable`.
Pure: the clock reading is the event's `ts_ms`.
"""

from __future__ import annotations

import re
from typing import Any

from terminus.events.errors import ERROR_TYPES, ErrorType, LLMErrorPayload
from terminus.events.inbound import StreamError
from terminus.statemachines.error_bodies import BodyRule, body_rule
from terminus.statemachines.error_kinds import kind_type, reason_type
from terminus.statemachines.retry_hints import (
    NO_HINT,
    RetryHint,
    completed_hint,
    error_object,
    hint_from_body,
    hint_from_headers,
)

_HEADER_TYPES: dict[str, ErrorType] = {name: name for name in ERROR_TYPES}

_CONTEXT_TOO_LONG = re.compile(
    r"prompt is too long|input is too long|exceed context limit|context window"
    r"|maximum context length|too many tokens|exceeds the maximum number of tokens",
    re.IGNORECASE,
)

_STATUS_TYPES: dict[int, ErrorType] = {
    429: "rate_limit",
    401: "auth",
    403: "auth",
    402: "budget",
    413: "context_overflow",
    408: "provider_unavailable",
    409: "provider_unavailable",
    425: "provider_unavailable",
}

_RETRYABLE_TYPES: frozenset[ErrorType] = frozenset(("rate_limit", "provider_unavailable"))
# Retrying cannot fix a spent budget, a bad key or an oversized prompt, whatever the provider hints.
_NEVER_RETRYABLE_TYPES: frozenset[ErrorType] = frozenset(("budget", "auth", "context_overflow"))
_FLAGS: dict[str, bool] = {"true": True, "1": True, "false": False, "0": False}


def classify(
    error: StreamError, *, provider: str | None, model: str | None, attempt: int | None
) -> LLMErrorPayload:
    """The typed error for a failed attempt; total: every StreamError yields a payload."""
    headers = {key.lower(): value.strip() for key, value in error.headers.items()}
    body = error_object(error.body)
    status = error.status if error.status is not None else _numeric_code(body)
    header_type = _header_type(headers)
    rule = None if header_type else body_rule(_message(body, error))
    found = _body_type(body, headers, status)
    error_type = header_type or (rule.type if rule else None) or found or _status_type(status)
    hint = _hint(headers, error.body, error.ts_ms)
    return LLMErrorPayload(
        type=error_type,
        message=_message(body, error),
        retryable=_retryable(error_type, headers, rule),
        status=error.status,
        retry_after_seconds=hint.retry_after_seconds,
        reset_at_epoch_ms=hint.reset_at_epoch_ms,
        provider=provider,
        model=model,
        attempt=attempt,
        reason=rule.reason if rule else _info_reason(body),
    )


def _header_type(headers: dict[str, str]) -> ErrorType | None:
    return _HEADER_TYPES.get(headers.get("x-llm-error-type", "").lower())


def _body_type(
    body: dict[str, Any] | None, headers: dict[str, str], status: int | None
) -> ErrorType | None:
    if body is None:
        return None
    stated = reason_type(body.get("details"))
    if stated is not None:
        return stated
    amzn = headers.get("x-amzn-errortype", "").partition(":")[0]
    kinds = (
        body.get("code"),
        body.get("type"),
        body.get("__type"),
        body.get("error_type"),
        amzn,
        body.get("status"),
    )
    kind = next((t for t in map(kind_type, kinds) if t is not None), None)
    message = _text(body.get("message"))
    # Rate-limit messages talk about tokens too ("Too many tokens, please wait"): a 429 never
    # means the prompt is too long.
    if kind == "rate_limit" or status == 429 or message is None:
        return kind
    return "context_overflow" if _CONTEXT_TOO_LONG.search(message) else kind


# Where an in-band error states its HTTP status: OpenRouter's `code`, TGI's `http_status_code`
# (its Messages API streams a validation, template or tool error as 422 after the 200).
_STATUS_FIELDS = ("code", "http_status_code")


def _numeric_code(body: dict[str, Any] | None) -> int | None:
    for field in _STATUS_FIELDS:
        code = None if body is None else body.get(field)
        if isinstance(code, str) and code.isascii() and code.isdigit():
            code = int(code)
        if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
            return code
    return None


def _status_type(status: int | None) -> ErrorType:
    # The request was accepted, so the failure came in-band, mid-stream: the provider's side.
    if status is None or 200 <= status < 300:
        return "provider_unavailable"
    if status in _STATUS_TYPES:
        return _STATUS_TYPES[status]
    return "provider_unavailable" if 500 <= status < 600 else "unknown"


def _retryable(error_type: ErrorType, headers: dict[str, str], rule: BodyRule | None) -> bool:
    explicit = _FLAGS.get(headers.get("x-llm-error-retryable", "").lower())
    if explicit is not None:
        return explicit
    if rule is not None:
        return rule.retryable
    should_retry = _FLAGS.get(headers.get("x-should-retry", "").lower())
    if should_retry is None or error_type in _NEVER_RETRYABLE_TYPES:
        return error_type in _RETRYABLE_TYPES
    return should_retry


def _hint(headers: dict[str, str], body: Any, now_ms: int) -> RetryHint:
    hint = hint_from_headers(headers, now_ms)
    if hint != NO_HINT:
        return hint
    return completed_hint(RetryHint(retry_after_seconds=hint_from_body(body)), now_ms)


def _message(body: dict[str, Any] | None, error: StreamError) -> str:
    message = None if body is None else _text(body.get("message"))
    if message is not None:
        return message
    if error.message:
        return error.message
    return "stream error" if error.status is None else f"HTTP {error.status}"


def _info_reason(body: dict[str, Any] | None) -> str | None:
    """The `google.rpc.ErrorInfo` reason that decided the type, named in the payload."""
    details = body.get("details") if body is not None else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and reason_type([detail]) is not None:
            return str(detail.get("reason"))
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
