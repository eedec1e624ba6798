"""What the subscriber SDK's parts share: the `Update` it yields, its errors, the `Source` port.

See `terminus.service.sdk.subscriber` for the contract and the error tree.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Final, NamedTuple, Protocol

import msgspec

from terminus.events.codec import CodecError, decode_frame
from terminus.events.outbound import SessionUpdate
from terminus.service import TerminusError

UNDECODABLE: Final = (CodecError, msgspec.MsgspecError, KeyError, UnicodeDecodeError)


class Update(NamedTuple):
    """One frame of the session stream and its cursor (the frame's stream id)."""

    cursor: str
    frame: SessionUpdate

    @property
    def kind(self) -> str:
        """The frame's `sessionUpdate` tag, e.g. "agent_message_chunk"."""
        return str(type(self.frame).__struct_config__.tag)

    @property
    def turn_id(self) -> str:
        return self.frame.turn_id


class SubscriberError(TerminusError):
    """Root of the subscriber SDK's errors."""


class SubscriptionRefused(SubscriberError):
    """The source answered with a final no; retrying the same request cannot succeed."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status, self.reason = status, reason


class SubscriptionDenied(SubscriptionRefused):
    """The credentials do not grant this session (a missing, bad, expired or foreign token, or a
    Redis user without the right password or ACL); subscribe again with a valid one."""


class SourceUnavailable(SubscriberError):
    """The source kept failing for longer than the backoff allows; `cursor` is where to resume."""

    def __init__(self, cursor: str | None, waited_s: float) -> None:
        super().__init__(f"source unavailable for {waited_s:.1f}s (resume after {cursor})")
        self.cursor, self.waited_s = cursor, waited_s


class UnreadableFrame(SubscriberError):
    """A frame this SDK cannot decode (a newer server's frame kind, or corrupt bytes)."""

    def __init__(self, cursor: str, reason: str) -> None:
        super().__init__(f"unreadable frame at {cursor}: {reason}")
        self.cursor, self.reason = cursor, reason


class Interrupted(TerminusError):
    """Raised by a source when its connection failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after_s = retry_after_s


class Source(Protocol):
    """Where updates come from: one connection's worth of frames after `after`, raising
    `Interrupted` when that connection fails (and `SubscriberError` when all is lost)."""

    def read(self, session_id: str, after: str | None) -> AsyncGenerator[Update, None]: ...


def frame_at(cursor: str, raw: bytes | str) -> SessionUpdate:
    """The frame stored as `raw` at stream id `cursor`, with its `cursor` set; raises what the
    decoder raises. Every reader of a session stream makes its frames here."""
    return msgspec.structs.replace(decode_frame(raw), cursor=cursor)


def decoded(cursor: str, raw: bytes | str) -> Update:
    """The frame stored as `raw` at `cursor`, or `UnreadableFrame`."""
    try:
        return Update(cursor, frame_at(cursor, raw))
    except UNDECODABLE as exc:
        raise UnreadableFrame(cursor, str(exc)) from exc


def cursor_after(a: str, b: str) -> bool:
    """Whether cursor (stream id) `a` comes after `b`."""
    ams, _, aseq = a.partition("-")
    bms, _, bseq = b.partition("-")
    return (int(ams), int(aseq or 0)) > (int(bms), int(bseq or 0))
