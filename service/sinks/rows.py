"""The rows one applied event writes: pure, from the fold's outputs to what the database holds.

A message is re-emitted whole each time one of its steps is sealed; its version is the turn's
position after the sealing event (step, attempt, seq), then the entry's place in the log. Within
a turn the position never goes back and the log position always goes forward, so a later
emission always has a higher version, and an earlier or repeated one never wins the upsert.
"""

from __future__ import annotations

from typing import NamedTuple

from terminus.events.codec import encode_json
from terminus.events.outbound import PartialRecord, PersistedMessage, TurnConcluded
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

MESSAGES_AT = 2  # where `Outputs.lengths()` counts messages, partials and commands
PARTIALS_AT = 3
COMMANDS_AT = 1


class Version(NamedTuple):
    """Compared in this order: the turn's step, attempt and seq, then the entry id's two parts."""

    step: int
    attempt: int
    seq: int
    log_ms: int
    log_seq: int


class MessageRow(NamedTuple):
    """One row of `messages`; `body` is the message exactly as `terminus messages --json`
    prints it, `parts` and `usage` its parts and usage as JSON."""

    session_id: str
    message_id: str
    turn_id: str
    version: Version
    body: str
    parts: str
    finish_reason: str
    usage: str
    provider: str
    model: str


class TurnRow(NamedTuple):
    """One row of `turns`: a final turn, how it ended and what failed it (JSON or None)."""

    session_id: str
    turn_id: str
    version: Version
    state: str
    stop_reason: str
    message_id: str | None
    error_type: str | None
    error: str | None
    partial: str | None


Row = MessageRow | TurnRow


def version_of(turn: Turn, entry_id: str) -> Version:
    """The version of what `turn` emitted at entry `entry_id`."""
    ms, _, seq = entry_id.partition("-")
    return Version(turn.step, turn.attempt, turn.last_seq, int(ms), int(seq or 0))


def rows_of(entry_id: str, turn: Turn, out: Outputs, since: tuple[int, ...]) -> list[Row]:
    """The rows of what one event appended to `out` after `since` (`out.lengths()` before it)."""
    version = version_of(turn, entry_id)
    rows: list[Row] = [message_row(m, version) for m in out.messages[since[MESSAGES_AT] :]]
    partials = {p.turn_id: p for p in out.partials[since[PARTIALS_AT] :]}
    for command in out.commands[since[COMMANDS_AT] :]:
        if isinstance(command, TurnConcluded):
            rows.append(turn_row(command, version, partials.get(command.turn_id)))
    return rows


def message_row(message: PersistedMessage, version: Version) -> MessageRow:
    return MessageRow(
        session_id=message.session_id,
        message_id=message.message_id,
        turn_id=message.turn_id,
        version=version,
        body=encode_json(message).decode(),
        parts=encode_json(message.parts).decode(),
        finish_reason=message.finish_reason,
        usage=encode_json(message.usage).decode(),
        provider=message.provider,
        model=message.model,
    )


def turn_row(end: TurnConcluded, version: Version, partial: PartialRecord | None) -> TurnRow:
    error = end.error
    return TurnRow(
        session_id=end.session_id,
        turn_id=end.turn_id,
        version=version,
        state=end.state,
        stop_reason=end.stop_reason,
        message_id=end.message_id,
        error_type=None if error is None else error.type,
        error=None if error is None else encode_json(error).decode(),
        partial=None if partial is None else encode_json(partial).decode(),
    )
