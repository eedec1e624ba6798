"""The one place events are turned into bytes and back (JSON and MessagePack).

Events are versioned (`v`, events/versions.py): the worker's hot path decodes straight into the
typed union and checks one int; only an event of another version, or one that does not decode,
takes the slow path: a generic decode, the version check, the upcasters, then `msgspec.convert`.

Errors:
    CodecError
     +-- EventTooLarge       the raw payload is over the per-event size limit
     +-- EventDecodeError    not an event of the contract; `field` names the offending path
          +-- UnsupportedVersion  `v` is newer than this build reads (field `$.v`)
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import msgspec

from terminus.events.inbound import InboundEvent
from terminus.events.outbound import PartialRecord, PersistedMessage, ProducerCommand, SessionUpdate
from terminus.events.versions import (
    DEFAULT,
    Document,
    NewerVersion,
    Schema,
    VersionError,
    version_of,
)

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


class UnsupportedVersion(EventDecodeError):
    """The event was written on a newer contract version than this build reads: upgrade the
    workers, then requeue its dead letter."""


_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()
_json_event: msgspec.json.Decoder[InboundEvent] = msgspec.json.Decoder(InboundEvent)
_msgpack_event: msgspec.msgpack.Decoder[InboundEvent] = msgspec.msgpack.Decoder(InboundEvent)
_json_any = msgspec.json.Decoder()
_msgpack_any = msgspec.msgpack.Decoder()
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


def decode_event(raw: bytes | str, fmt: Format = "json", schema: Schema = DEFAULT) -> InboundEvent:
    """Decode one inbound event of any version `schema` reads, or raise a `CodecError` that
    names the offending field."""
    if isinstance(raw, str):
        raw = raw.encode()
    if len(raw) > MAX_EVENT_BYTES:
        raise EventTooLarge(
            f"event of {len(raw)} bytes exceeds the limit of {MAX_EVENT_BYTES} bytes", "$"
        )
    try:
        event = _json_event.decode(raw) if fmt == "json" else _msgpack_event.decode(raw)
    except msgspec.ValidationError as exc:
        return _other_version(raw, fmt, schema, _validation_error(exc))
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"malformed {fmt}: {exc}", "$") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        # What msgspec raises for bytes that are not UTF-8 inside a string, and for nesting past
        # the recursion limit: malformed input like any other, never an escape from the codec.
        raise EventDecodeError(f"malformed {fmt}: {type(exc).__name__}: {exc}", "$") from None
    if event.v != schema.current:
        return _other_version(raw, fmt, schema, None)
    return event


def _other_version(
    raw: bytes, fmt: Format, schema: Schema, typed_error: EventDecodeError | None
) -> InboundEvent:
    """The slow path: an event of another version, or one the typed decoder refused (which may
    be a newer version's, and must then be refused for its version, not its fields)."""
    try:
        doc = _json_any.decode(raw) if fmt == "json" else _msgpack_any.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        assert typed_error is not None  # the typed decoder accepted it, so it is an object
        raise typed_error
    if typed_error is not None and _version(doc) == schema.current:
        raise typed_error  # already current: the typed decoder's error stands, word for word
    try:
        event: InboundEvent = msgspec.convert(_upcast(doc, schema), InboundEvent)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc) from None
    return event


def _version(doc: Document) -> int:
    try:
        return version_of(doc)
    except VersionError as exc:
        raise EventDecodeError(exc.reason, exc.field) from None


def _upcast(doc: Document, schema: Schema) -> Document:
    try:
        return schema.upcast(doc)
    except NewerVersion as exc:
        raise UnsupportedVersion(exc.reason, exc.field) from None
    except VersionError as exc:
        raise EventDecodeError(exc.reason, exc.field) from None


def _validation_error(exc: msgspec.ValidationError) -> EventDecodeError:
    return EventDecodeError(str(exc), _field_of(str(exc)))


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
