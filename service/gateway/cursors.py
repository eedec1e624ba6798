"""Session cursors from clients: a stream id `ms-seq` (or `ms`), each part an unsigned 64-bit
integer, as Redis itself accepts. Anything else is refused before it reaches a shared read: one
client's `Last-Event-ID` of `abc` once made the gateway's one XREAD fail for every session.
"""

from __future__ import annotations

import re
from typing import Final

from terminus.service import TerminusError

_ID: Final = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")
_U64: Final = 2**64 - 1


class BadCursor(TerminusError, ValueError):
    """Not a stream id Redis would accept; the message says what was wrong."""


def parse_cursor(text: str) -> str:
    """`text` as a full stream id `ms-seq`; `BadCursor` if it is not one."""
    match = _ID.fullmatch(text)
    if match is None:
        raise BadCursor("a cursor is a stream id: digits, optionally '-' and digits")
    ms, seq = int(match[1]), int(match[2] or 0)
    if ms > _U64 or seq > _U64:
        raise BadCursor("a cursor's parts are unsigned 64-bit integers")
    return f"{ms}-{seq}"
