"""The one place events are turned into bytes and back (JSON and MessagePack).

Errors:
    CodecError
     +-- EventTooLarge   the raw payload is over the per-event size limit
     +-- EventDecodeError  not an event of the contract; `field` names the offending path
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import msgspec

from events.inbound import InboundEvent
from events.outbound import PartialRecord, PersistedMessage, ProducerCommand, SessionUpdate

MAX_EVENT_BYTES: Final = 1024 * 1024
Format = Literal["json", "msgpack"]

_FIELD_PATH = re.compile(r"at `(\$[^`]*)`")


class CodecError(ValueError):
    """Raised for any payload that cannot become an event."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field


class EventTooLarge(CodecError):
    """The payload exceeds `MAX_EVENT_BYTES`; it is never parsed."""


class EventDecodeError(CodecError):
    """Malformed bytes, an unknown `type`, a missing field or a field of the wrong type."""


_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()
_json_event: msgspec.json.Decoder[InboundEvent] = msgspec.json.Decoder(InboundEvent)
_msgpack_event: msgspec.msgpack.Decoder[InboundEvent] = msgspec.msgpack.Decoder(InboundEvent)
_json_frame: msgspec.json.Decoder[SessionUpdate] = msgspec.json.Decoder(SessionUpdate)
_json_message = msgspec.json.Decoder(PersistedMessage)
_json_partial = msgspec.json.Decoder(PartialRecord)
_json_command: msgspec.json.Decoder[ProducerCommand] = msgspec.json.Decoder(ProducerCommand)


def encode_json(obj: Any) -> bytes:
    """Canonical JSON bytes of any contract struct (field order is declaration order)."""
    return _json_encoder.encode(obj)


def encode_msgpack(obj: Any) -> bytes:
    """MessagePack bytes of any contract struct."""
    return _msgpack_encoder.encode(obj)


def encode_event(event: InboundEvent, fmt: Format = "json") -> bytes:
    """Bytes of one inbound event in the chosen wire format."""
    return _json_encoder.encode(event) if fmt == "json" else _msgpack_encoder.encode(event)


def decode_event(raw: bytes | str, fmt: Format = "json") -> InboundEvent:
    """Decode one inbound event, or raise a `CodecError` that names the offending field."""
    if isinstance(raw, str):
        raw = raw.encode()
    if len(raw) > MAX_EVENT_BYTES:
        raise EventTooLarge(
            f"event of {len(raw)} bytes exceeds the limit of {MAX_EVENT_BYTES} bytes", "$"
        )
    try:
        if fmt == "json":
            return _json_event.decode(raw)
        return _msgpack_event.decode(raw)
    except msgspec.ValidationError as exc:
        raise EventDecodeError(str(exc), _field_of(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"malformed {fmt}: {exc}", "$") from None


def sniff_format(raw: bytes) -> Format:
    """JSON events start with `{`; anything else is taken as MessagePack."""
    return "json" if raw[:1] == b"{" else "msgpack"


def decode_frame(raw: bytes | str) -> SessionUpdate:
    """Decode one session-update frame."""
    return _json_frame.decode(raw)


def decode_message(raw: bytes | str) -> PersistedMessage:
    """Decode one persisted message."""
    return _json_message.decode(raw)


def decode_partial(raw: bytes | str) -> PartialRecord:
    """Decode one partial record."""
    return _json_partial.decode(raw)


def decode_command(raw: bytes | str) -> ProducerCommand:
    """Decode one producer command."""
    return _json_command.decode(raw)


def _field_of(message: str) -> str:
    match = _FIELD_PATH.search(message)
    if match:
        return match.group(1)
    missing = re.search(r"missing required field `([^`]*)`", message)
    return f"$.{missing.group(1)}" if missing else "$"
