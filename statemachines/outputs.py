"""What applying one event (or a batch) produced, for the shell to commit atomically."""

from __future__ import annotations

from typing import Any

import msgspec

from terminus.events.outbound import PartialRecord, PersistedMessage, ProducerCommand, SessionUpdate
from terminus.statemachines.turn import Turn


class Transition(msgspec.Struct, frozen=True, kw_only=True):
    """One state change the machine allowed, with the trigger that caused it."""

    session_id: str
    turn_id: str
    step: int
    attempt: int
    source: str
    dest: str
    trigger: str


class Outputs(msgspec.Struct, kw_only=True):
    """A sink the fold appends to; one per event or one per batch."""

    frames: list[SessionUpdate] = msgspec.field(default_factory=list)
    commands: list[ProducerCommand] = msgspec.field(default_factory=list)
    messages: list[PersistedMessage] = msgspec.field(default_factory=list)
    partials: list[PartialRecord] = msgspec.field(default_factory=list)
    transitions: list[Transition] = msgspec.field(default_factory=list)
    ignored: list[str] = msgspec.field(default_factory=list)

    def lengths(self) -> tuple[int, ...]:
        """Where each list ends now, for `rollback` (spelled out: taken before every event)."""
        return (
            len(self.frames),
            len(self.commands),
            len(self.messages),
            len(self.partials),
            len(self.transitions),
            len(self.ignored),
        )

    def rollback(self, lengths: tuple[int, ...]) -> None:
        """Drop what was appended since `lengths` was taken."""
        for items, length in zip(self._lists(), lengths, strict=True):
            del items[length:]

    def _lists(self) -> tuple[list[Any], ...]:
        return (
            self.frames,
            self.commands,
            self.messages,
            self.partials,
            self.transitions,
            self.ignored,
        )


def ignore(turn: Turn, out: Outputs, reason: str) -> None:
    """An event that changes nothing: listed in the outputs and counted on the turn."""
    turn.ignored[reason] = turn.ignored.get(reason, 0) + 1
    out.ignored.append(reason)
