"""Versions of the inbound event contract and the upcasters between them (docs/schema.md).

Every inbound event carries `v`, the contract version its producer wrote (terminus writers always
write it: the encoder writes every field, and `Event.v` defaults to `CURRENT`). A document without
`v` is version 1 where that matters: when it does not decode in the current layout. A build reads
its `current` version directly and every older one through a chain of upcasters, one per step
(`n` -> `n + 1`), each a pure function of the decoded document (a dict, before it becomes a typed
event). A version newer than `current` is refused: the producer is ahead of this worker, which
cannot know what the new fields mean.

Errors (`terminus.events.codec` turns them into `CodecError`s, so a worker dead-letters the entry):
    VersionError      `v` is not a version (not a positive integer)
     +-- NewerVersion   `v` is newer than this build reads
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

CURRENT: Final = 1
FIRST: Final = 1  # the first version, and that of a document without `v`
VERSION_FIELD: Final = "$.v"

Document = dict[str, Any]
Upcaster = Callable[[Document], Document]


class VersionError(ValueError):
    """The document's `v` cannot be read; `reason` says why, `field` is always `$.v`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = VERSION_FIELD


class NewerVersion(VersionError):
    """Written by a producer on a newer contract than this build (`version` > `current`)."""

    def __init__(self, version: int, current: int) -> None:
        # The reason names only the event's version: it is stored in dead letters, and a replay
        # of an old log by a later build must write the same bytes (tests/golden).
        super().__init__(
            f"event version {version} is newer than this build reads: "
            "upgrade the workers before the producers"
        )
        self.version = version
        self.current = current


@dataclass(frozen=True)
class Schema:
    """A contract version and the upcasters that bring every older version up to it.

    `upcasters[n]` turns a version-`n` document into a version-`n + 1` one; the chain must be
    complete (checked here, so a build missing a step fails when it starts, not per event).
    """

    current: int = CURRENT
    upcasters: Mapping[int, Upcaster] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.current < FIRST:
            raise ValueError(f"schema version {self.current} is below the first ({FIRST})")
        missing = [n for n in range(FIRST, self.current) if n not in self.upcasters]
        if missing:
            steps = ", ".join(f"{n} -> {n + 1}" for n in missing)
            raise ValueError(f"schema version {self.current} has no upcaster for {steps}")

    def upcast(self, doc: Document) -> Document:
        """`doc` at the current version; raises `VersionError` for an unreadable `v`."""
        version = version_of(doc)
        if version > self.current:
            raise NewerVersion(version, self.current)
        for n in range(version, self.current):
            doc = {**self.upcasters[n](dict(doc)), "v": n + 1}
        return doc


def version_of(doc: Document) -> int:
    """The document's contract version; raises `VersionError` unless it is a positive int."""
    version = doc.get("v", FIRST)
    # `type(...) is int`: JSON true is a Python bool, which isinstance would take for 1.
    if type(version) is not int or version < FIRST:
        shown = _shown(version)
        raise VersionError(f"event version must be an integer from {FIRST} up, got {shown}")
    return version


def _shown(value: object, width: int = 40) -> str:
    """`value` as the producer wrote it (JSON), cut short: it ends up in a dead letter."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


DEFAULT: Final = Schema()
