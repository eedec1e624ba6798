"""The release entry that tells the fold to let archived turns go, and stream ids as numbers.

A release entry (field `r` of an inbound entry, JSON `Release`) is appended to the log by the
archiver after the segment is durable, through the lease-fenced append script. The fold applies
it like any entry: each listed turn's snapshot becomes a tombstone (late events for it are then
ignored and counted), its message and partial are deleted; each `forget` turn's tombstone is
deleted; each idle session's stream is deleted if its last frame is still the one the archiver
saw (a session with no open turn whose last frame, older than the retention, is of an archived
turn: no frontend needs it, and a new turn's first frame would have made the check fail). The
sessions of released turns are listed in `{p}:resting` until a release names them so: the
archiver finds them there, however long after their turn's release they fall idle. Every
release marks where the transitions and commands streams end; with `archived_to`, the fold
trims both up to the newest mark of a release older than that id (whose entries are all
archived: replay rebuilds what was trimmed), so they hold what the live log holds.
Being in the log, releases are replayed at the same place, so a rebuild releases the
same state as the live pool did.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

RELEASE_FIELD: Final = b"r"
STREAM_ID: Final = r"^([0-9]{1,18}-[0-9]{1,18})?$"  # or empty; digits the fold's int() reads
TOMBSTONE: Final = b"archived"  # the snapshot of a released turn: no msgpack `Turn` reads so


class Release(msgspec.Struct, frozen=True, kw_only=True):
    """Turns whose Redis state goes (archived), tombstones that go too (`forget`), idle
    sessions whose stream goes if its last frame is still the one named (`sessions`), and
    the id up to which the log is archived (`archived_to`, "" if not said): the transitions
    and commands of the entries before the newest earlier release older than it go too."""

    turns: list[str] = msgspec.field(default_factory=list)
    forget: list[str] = msgspec.field(default_factory=list)
    sessions: list[tuple[str, bytes]] = msgspec.field(default_factory=list)
    archived_to: Annotated[str, msgspec.Meta(pattern=STREAM_ID)] = ""


_release = msgspec.json.Decoder(Release)


def encode_release(release: Release) -> bytes:
    return msgspec.json.encode(release)


def decode_release(raw: bytes) -> Release:
    """Raises `msgspec.DecodeError` / `ValidationError` for a malformed release."""
    return _release.decode(raw)


def id_key(entry_id: str) -> tuple[int, int]:
    """A stream id as numbers, which order like the stream."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def next_id(entry_id: str) -> str:
    """The smallest stream id after `entry_id`: XTRIM MINID keeps it and what follows."""
    ms, seq = id_key(entry_id)
    return f"{ms}-{seq + 1}"
