"""What the subscriber SDK's parts share: the `Update` it yields, its errors, the `Source` port,
and `UnknownFrames`, which passes over the frames of a kind a newer server added.

See `terminus.service.sdk.subscriber` for the contract and the error tree, and docs/schema.md for
the versioning rule of frames: fields and kinds are added, never changed, so a reader ignores a
field it does not know and passes over a frame of a kind it does not know.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from typing import Final, NamedTuple, Protocol, get_args

import msgspec

from terminus.events.codec import CodecError, decode_frame
from terminus.events.outbound import SessionUpdate
from terminus.service import TerminusError

UNDECODABLE: Final = (CodecError, msgspec.MsgspecError, KeyError, UnicodeDecodeError)
KINDS: Final = frozenset(str(t.__struct_config__.tag) for t in get_args(SessionUpdate))

log = logging.getLogger("terminus.sdk")


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


class UnknownFrames:
    """The frames of a kind this SDK does not know (a newer server's), passed over: counted per
    kind in `counts`, and each kind reported once, the first time, through `report(kind,
    cursor)` (default: one warning on the `terminus.sdk` logger). A frame read again after a
    resume is not counted twice."""

    def __init__(self, report: Callable[[str, str], None] | None = None) -> None:
        self.report = report or _warn
        self.counts: dict[str, int] = {}
        self.last: str | None = None  # the newest cursor counted

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def pass_over(self, kind: str, cursor: str) -> None:
        """Count the frame of `kind` at `cursor`; report `kind` if it is new."""
        if self.last is not None and not cursor_after(cursor, self.last):
            return
        self.last = cursor
        seen = kind in self.counts
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if not seen:
            self.report(kind, cursor)


def _warn(kind: str, cursor: str) -> None:
    log.warning(
        "passing over frames of kind %r (first at %s): a newer server's; upgrade the SDK to "
        "read them",
        kind,
        cursor,
    )


def frame_at(cursor: str, raw: bytes | str) -> SessionUpdate:
    """The frame stored as `raw` at stream id `cursor`, with its `cursor` set; raises what the
    decoder raises. Every reader of a session stream makes its frames here."""
    return msgspec.structs.replace(decode_frame(raw), cursor=cursor)


def decoded(cursor: str, raw: bytes | str, unknown: UnknownFrames) -> Update | None:
    """The frame stored as `raw` at `cursor`; None, once `unknown` has counted it, for a frame
    of a kind this SDK does not know; `UnreadableFrame` for anything else that does not decode
    (not a JSON object, no kind, a known kind without its fields)."""
    try:
        return Update(cursor, frame_at(cursor, raw))
    except UNDECODABLE as exc:
        kind = _unknown_kind(raw)
        if kind is None:
            raise UnreadableFrame(cursor, str(exc)) from exc
    unknown.pass_over(kind, cursor)
    return None


def _unknown_kind(raw: bytes | str) -> str | None:
    """The `sessionUpdate` of `raw` if it is a JSON object of a kind not in `KINDS`."""
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    kind = document.get("sessionUpdate") if isinstance(document, dict) else None
    return kind if isinstance(kind, str) and kind and kind not in KINDS else None


def cursor_after(a: str, b: str) -> bool:
    """Whether cursor (stream id) `a` comes after `b`."""
    ams, _, aseq = a.partition("-")
    bms, _, bseq = b.partition("-")
    return (int(ams), int(aseq or 0)) > (int(bms), int(bseq or 0))
