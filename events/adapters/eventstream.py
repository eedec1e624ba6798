"""AWS `application/vnd.amazon.eventstream` frames -> provider payloads.

A frame is: total length, headers length, prelude CRC32 (big-endian u32 each), headers, payload,
message CRC32. InvokeModelWithResponseStream payloads are `{"bytes": <base64 Anthropic event>}`
and decode to that event; other event payloads (ConverseStream) come back keyed by their
`:event-type` header, the shape `ConverseAdapter` reads. Exception frames become an Anthropic
`error` event, so either adapter reports them as a `StreamError`.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any, Final

import msgspec

from terminus.events.adapters.base import AdapterError
from terminus.events.adapters.values import decode, error_message

_PRELUDE: Final = struct.Struct(">III")
_MIN_FRAME: Final = _PRELUDE.size + 4
# Fixed value sizes of the header types; 6 (bytes) and 7 (string) carry a u16 length instead.
_FIXED_SIZES: Final = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


# A frame longer than this is not one: the prelude is garbage (Bedrock's frames are far smaller).
_MAX_FRAME: Final = 16 * 1024 * 1024


class FrameError(AdapterError):
    """A frame that is complete, or claims to be, but cannot be read."""


def decode_eventstream(data: bytes) -> list[Any]:
    """Every frame's payload, in order; `AdapterError` on a truncated frame or a CRC mismatch."""
    payloads: list[Any] = []
    offset = 0
    while offset < len(data):
        frame = split_frame(data, offset)
        if frame is None:
            raise AdapterError(f"truncated event-stream frame at byte {offset}")
        payloads.append(payload_of_frame(frame, offset))
        offset += len(frame)
    return payloads


def split_frame(data: bytes | bytearray, at: int = 0, where: int | None = None) -> bytes | None:
    """The frame starting at `at`, None while it is incomplete; `FrameError` on a bad prelude.

    `where` is the frame's position in the whole response, for the error message (default `at`).
    """
    where = at if where is None else where
    if len(data) - at < _MIN_FRAME:
        return None
    total, headers_len, prelude_crc = _PRELUDE.unpack_from(data, at)
    if binascii.crc32(bytes(data[at : at + 8])) != prelude_crc:
        raise FrameError(f"event-stream prelude CRC mismatch at byte {where}")
    if total < _MIN_FRAME + headers_len or total > _MAX_FRAME:
        raise FrameError(f"impossible event-stream frame length {total} at byte {where}")
    return bytes(data[at : at + total]) if len(data) - at >= total else None


def payload_of_frame(frame: bytes, offset: int = 0) -> Any:
    """The payload of one whole frame; `FrameError` on a CRC mismatch or unreadable content."""
    if binascii.crc32(frame[:-4]) != struct.unpack(">I", frame[-4:])[0]:
        raise FrameError(f"event-stream message CRC mismatch at byte {offset}")
    headers_len = _PRELUDE.unpack_from(frame)[1]
    headers = _headers(frame[_PRELUDE.size : _PRELUDE.size + headers_len], offset)
    return _payload(headers, frame[_PRELUDE.size + headers_len : -4], offset)


def _headers(raw: bytes, offset: int) -> dict[str, str]:
    """String-valued headers; values of other types are skipped."""
    headers: dict[str, str] = {}
    pos = 0
    try:
        while pos < len(raw):
            name_end = pos + 1 + raw[pos]
            name, kind = raw[pos + 1 : name_end].decode(), raw[name_end]
            pos = name_end + 1
            size = _FIXED_SIZES.get(kind)
            if size is None:
                size = struct.unpack_from(">H", raw, pos)[0]
                pos += 2
            if kind == 7:
                headers[name] = raw[pos : pos + size].decode()
            pos += size
    except (IndexError, struct.error, UnicodeDecodeError):
        raise FrameError(f"malformed event-stream headers at byte {offset}") from None
    return headers


def _payload(headers: dict[str, str], raw: bytes, offset: int) -> Any:
    try:
        return _unwrap(headers, decode(raw) if raw else {})
    except (msgspec.DecodeError, binascii.Error, ValueError):
        raise FrameError(f"malformed event-stream payload at byte {offset}") from None


def _unwrap(headers: dict[str, str], body: Any) -> Any:
    if headers.get(":message-type", "event") != "event":
        return _exception(headers, body)
    if isinstance(body, dict) and isinstance(body.get("bytes"), str):
        return decode(base64.b64decode(body["bytes"], validate=True))
    return {headers.get(":event-type", ""): body}


def unwrap_decoded_frame(doc: Any) -> Any:
    """A frame already decoded to `{"headers", "payload"}` JSON (the `.decoded.jsonl` form)."""
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("headers"), dict)
        or "payload" not in doc
    ):
        return doc
    headers = {str(k): str(v) for k, v in doc["headers"].items()}
    try:
        return _unwrap(headers, doc["payload"])
    except (msgspec.DecodeError, binascii.Error):
        raise AdapterError("malformed base64 event in a decoded event-stream frame") from None


def _exception(headers: dict[str, str], body: Any) -> dict[str, Any]:
    kind = headers.get(":exception-type") or headers.get(":error-code") or "exception"
    message = error_message(body) or headers.get(":error-message") or kind
    return {"type": "error", "error": {"type": kind, "message": message, "body": body}}
