"""A failed HTTP response (status, headers, body) -> one `StreamError`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from terminus.events.adapters.base import AttemptContext
from terminus.events.adapters.values import arr, decode, error_message
from terminus.events.inbound import StreamError


def http_error_event(
    ctx: AttemptContext,
    seq: int,
    status: int | None,
    headers: Mapping[str, str] | None,
    body: Any,
) -> StreamError:
    """The error the provider sent; `message` is its `error.message`, else `HTTP <status>`."""
    if isinstance(body, bytes | bytearray):
        body = bytes(body).decode("utf-8", "replace")
    message = _body_message(body) or (f"HTTP {status}" if status is not None else "HTTP error")
    return StreamError(
        session_id=ctx.session_id,
        turn_id=ctx.turn_id,
        step=ctx.step,
        attempt=ctx.attempt,
        seq=seq,
        ts_ms=ctx.ts_ms,
        status=status,
        headers={str(k).lower(): str(v) for k, v in (headers or {}).items()},
        body=body,
        message=message,
    )


def _body_message(body: Any) -> str:
    if isinstance(body, str):
        try:
            body = decode(body)
        except msgspec.DecodeError:
            return ""
    # Gemini's non-SSE stream endpoint wraps its error object in a one-element array.
    if arr(body):
        body = body[0]
    return error_message(body)
