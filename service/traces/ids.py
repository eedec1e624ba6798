"""Trace and span ids of a turn: derived from its identity, or taken from its `traceparent`.

Derived ids are a hash of (session, turn, step, attempt): exporting the same log twice gives the
same ids, so a backend that already holds a span sees the same span again, not a second one.
A `traceparent` (W3C Trace Context, version 00) propagated into the turn puts the turn in the
caller's trace, under the caller's span; one that does not parse is ignored, as the
recommendation asks of a receiver.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, NamedTuple

TRACEPARENT: Final = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
INVALID_TRACE: Final = "0" * 32
INVALID_SPAN: Final = "0" * 16


class Parent(NamedTuple):
    """The caller's span, from a valid `traceparent`."""

    trace_id: str
    span_id: str
    sampled: bool


def parse_traceparent(value: str | None) -> Parent | None:
    """The parent a `traceparent` names, or None if it is absent or not a valid version-00 one."""
    found = TRACEPARENT.match(value.strip().lower()) if value else None
    if found is None:
        return None
    trace_id, span_id, flags = found.groups()
    if trace_id == INVALID_TRACE or span_id == INVALID_SPAN:
        return None
    return Parent(trace_id, span_id, bool(int(flags, 16) & 1))


def _digest(*parts: str | int) -> bytes:
    text = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(text.encode()).digest()


def _nonzero(hexed: str) -> str:
    """All zeros is the invalid id; a hash lands there with probability 2**-64 at worst."""
    return hexed if hexed.strip("0") else hexed[:-1] + "1"


def trace_id_of(session_id: str, turn_id: str) -> str:
    """The trace of a turn no caller put in a trace of its own."""
    return _nonzero(_digest("trace", session_id, turn_id)[:16].hex())


def span_id_of(session_id: str, turn_id: str, *position: str | int) -> str:
    """A span of the turn: the turn itself (no position), an attempt (step, attempt), a tool
    call ("tool", call id)."""
    return _nonzero(_digest("span", session_id, turn_id, *position)[:8].hex())
