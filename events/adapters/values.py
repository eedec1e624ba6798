"""Total accessors for untrusted provider JSON: a wrong type reads as empty, never raises."""

from __future__ import annotations

from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def arr(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def string(value: Any) -> str:
    """`value` if it is a string, else ''."""
    return value if isinstance(value, str) else ""


def count(value: Any) -> int:
    """`value` if it is an integer (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def error_message(payload: Any) -> str:
    """`payload.error.message`, or `payload.error` if it is a string, or `payload.message`."""
    body = obj(payload)
    error = body.get("error")
    return string(obj(error).get("message")) or string(error) or string(body.get("message"))


def decode(raw: str | bytes) -> Any:
    """Any JSON value; raises `msgspec.DecodeError` on malformed input."""
    return _decoder.decode(raw)


def parse_object(raw: str) -> dict[str, Any] | None:
    """The JSON object in `raw` ('' reads as {}), or None if it is not one."""
    if not raw.strip():
        return {}
    try:
        value = _decoder.decode(raw)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def compact(value: Any) -> str:
    """Compact JSON text of `value`."""
    return _encoder.encode(value).decode()
