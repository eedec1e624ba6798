"""Inbound entries as read from the log, decoded into events, release entries or the reason
they go to the dead letters (the first step of the fold, service/fold/applier.py).

Decoding never raises: whatever the bytes of one entry make the decoder do, that entry alone is
dead-lettered with the reason, and the rest of the batch goes on (DESIGN section 11).

A release entry (field `r`, service/retention/records.py) is the archiver's; any other entry
must hold an event in field `e`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

import msgspec

from terminus.events.codec import MAX_EVENT_BYTES, CodecError, decode_event, sniff_format
from terminus.events.inbound import InboundEvent
from terminus.service.fold.releases import RELEASE_FIELD, Release, decode_release
from terminus.service.keys import FIELD

KEPT_BYTES: Final = 1024  # of an oversized entry, in its dead letter


class Entry(NamedTuple):
    """An inbound stream entry as read: its id, its body and its delivery count.

    The body is the event's bytes when the entry holds field `e` alone, as the read scripts
    return it (no mapping is built on the hot path); the entry's fields as XRANGE returns them
    otherwise; None if the entry was deleted while pending."""

    id: str
    body: bytes | Mapping[bytes, bytes] | None
    deliveries: int = 1

    def fields(self) -> Mapping[bytes, bytes]:
        """The entry's fields however it was read (none if deleted)."""
        if isinstance(self.body, bytes):
            return {FIELD: self.body}
        return self.body or {}


class Decoded(msgspec.Struct):
    """An entry and either its event or the reason it goes to the dead letters (a Struct: its
    C initializer is several times cheaper than a dataclass's, once per entry)."""

    entry: Entry
    event: InboundEvent | None = None
    problem: str | None = None
    raw: bytes = b""
    release: Release | None = None


def read_entries(ids: list[bytes], payloads: list[bytes | list[bytes]]) -> list[Entry]:
    """Entries as read.lua and commit.lua return them: a payload is the value of field `e`, or
    the flat field list of an entry that does not hold exactly that field."""
    return [
        Entry(i.decode(), p if isinstance(p, bytes) else pairs(p))
        for i, p in zip(ids, payloads, strict=True)
    ]


def pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    """A flat field list [f1, v1, f2, v2, ...] as a mapping."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def decode_entries(
    entries: Iterable[Entry],
    max_deliveries: int,
    forced: Mapping[str, str] | None = None,
    max_bytes: int = MAX_EVENT_BYTES,
) -> list[Decoded]:
    """Decode every entry; `forced` maps entry ids to dead-letter reasons decided earlier; an
    event larger than `max_bytes` is dead-lettered unread, with its first KiB and its size."""
    return [_decode(entry, max_deliveries, forced or {}, max_bytes) for entry in entries]


def _decode(
    entry: Entry, max_deliveries: int, forced: Mapping[str, str], max_bytes: int
) -> Decoded:
    body = entry.body
    if body is None:
        return Decoded(entry)  # deleted while pending: nothing to apply, only to ack
    raw: bytes | None = body if isinstance(body, bytes) else body.get(FIELD)
    released = None if isinstance(body, bytes) or len(body) != 1 else body.get(RELEASE_FIELD)
    if raw is None and released is None:
        return Decoded(entry, problem="entry has no field 'e'", raw=_fields_bytes(entry.fields()))
    if entry.id in forced:
        return Decoded(entry, problem=forced[entry.id], raw=raw or released or b"")
    if entry.deliveries > max_deliveries:
        reason = f"delivered {entry.deliveries} times (max {max_deliveries})"
        return Decoded(entry, problem=reason, raw=raw or released or b"")
    if raw is None:
        return _release(entry, released or b"")
    if len(raw) > max_bytes:
        reason = (
            f"entry of {len(raw)} bytes exceeds the limit of {max_bytes} bytes "
            f"(the dead letter keeps its first {KEPT_BYTES})"
        )
        return Decoded(entry, problem=reason, raw=raw[:KEPT_BYTES])
    try:
        return Decoded(entry, event=decode_event(raw, sniff_format(raw)), raw=raw)
    except CodecError as exc:
        return Decoded(entry, problem=f"undecodable: {exc}", raw=raw)
    except Exception as exc:  # hostile bytes: one entry's problem, never the batch's
        return Decoded(entry, problem=f"undecodable: {_named(exc)}", raw=raw)


def _release(entry: Entry, raw: bytes) -> Decoded:
    try:
        return Decoded(entry, release=decode_release(raw), raw=raw)
    except msgspec.MsgspecError as exc:
        return Decoded(entry, problem=f"undecodable: release: {exc}", raw=raw)
    except Exception as exc:  # as above
        return Decoded(entry, problem=f"undecodable: release: {_named(exc)}", raw=raw)


def _named(exc: Exception) -> str:
    """An unexpected decoder failure (invalid UTF-8 in a string, nesting past the recursion
    limit), named so the dead letter says what it was."""
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _fields_bytes(fields: Mapping[bytes, bytes]) -> bytes:
    return msgspec.json.encode(
        {k.decode("latin-1"): v.decode("latin-1") for k, v in fields.items()}
    )
