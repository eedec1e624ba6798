"""`terminus simulate`: run files as the successive attempts of one turn, with no Redis.

A file is read by its suffix: `.sse` a raw provider response body (SSE, or whatever the wire
was: a Gemini JSON array, AWS event-stream frames); `.jsonl` normalized events (lines whose
`type` is an inbound event tag), else provider payloads one per line; `.json` an HTTP error
`{status_code, headers, body}`, a bare error body, a list of provider payloads, or one payload
(a body cut short is read as a raw body); `.eventstream` AWS event-stream frames (Bedrock).

Normalized files come in three kinds:
- events without `seq`: one attempt, numbered after the `attempt-started` simulate emits (or
  the file's own, if it leads);
- events that all carry `seq` (a log, e.g. exported from the inbound stream): folded exactly as
  given, any number of steps, attempts and tool results; a leading `turn-started` in the first
  file replaces the default one;
- only `tool-result` / `tool-error` lines without `seq`: the results of the tool calls of the step
  that awaits them, applied between two attempt files:
  `terminus simulate step1.sse results.jsonl step2.sse`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from terminus.events.adapters import CONTRACTS, AttemptContext
from terminus.events.inbound import AttemptStarted, InboundEvent, TurnStarted
from terminus.events.outbound import PartialRecord, PersistedMessage, SessionUpdate
from terminus.service import TerminusError
from terminus.service.cli.transcripts import (
    Located,
    TranscriptError,
    read_attempt,
    read_log,
    read_tool_outcomes,
)
from terminus.statemachines.config import CoreConfig
from terminus.statemachines.errors import IllegalEvent
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs, Transition
from terminus.statemachines.retry_policy import RetryPolicy
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import AttemptOutcome, Turn

SESSION_ID = "sim-session"
TURN_ID = "sim-turn"


class Outcome(msgspec.Struct, kw_only=True):
    """What `simulate` prints: final state, attempt history, message, partial and every frame."""

    state: str
    attempts: list[AttemptOutcome]
    message: PersistedMessage | None
    partial: PartialRecord | None
    updates: list[SessionUpdate]
    transitions: list[Transition]
    ignored: dict[str, int]
    unused_files: list[str]


class SimulationError(TerminusError):
    """A file could not be read or turned into a consistent attempt; `str()` is one line."""


def simulate(
    files: Sequence[Path],
    *,
    provider: str | None = None,
    lenient: bool = False,
    max_attempts: int | None = None,
    keep_partial: bool = True,
    session_id: str = SESSION_ID,
    turn_id: str = TURN_ID,
) -> Outcome:
    """Fold every file, one attempt each, through the turn machine and collect the outcome."""
    retry = RetryPolicy(max_attempts=max_attempts) if max_attempts else RetryPolicy()
    config = CoreConfig(retry=retry, keep_partial=keep_partial)
    out = Outputs()
    turn: Turn | None = None
    unused: list[str] = []
    for path in files:
        log = _read(read_log, path, session_id, turn_id)
        if turn is None:
            turn, log = _open(log, session_id, turn_id, max_attempts, config, out)
        if log is not None:
            _apply_all(turn, log, config, out, path)
        elif not _tool_outcomes(turn, path, config, out):
            if turn.state not in _STARTABLE:
                unused.append(str(path))
                continue
            _run_attempt(turn, path, provider, lenient, config, out)
    assert turn is not None
    return Outcome(
        state=turn.state.value,
        attempts=list(turn.history),
        message=out.messages[-1] if out.messages else None,
        partial=out.partials[-1] if out.partials else None,
        updates=out.frames,
        transitions=out.transitions,
        ignored=dict(turn.ignored),
        unused_files=unused,
    )


def _open(
    log: list[Located] | None,
    session_id: str,
    turn_id: str,
    max_attempts: int | None,
    config: CoreConfig,
    out: Outputs,
) -> tuple[Turn, list[Located] | None]:
    """The turn, from the first file's own `turn-started` if it is a log that has one."""
    if log and isinstance(log[0][0], TurnStarted):
        start, log = log[0][0], log[1:]
    else:
        start = TurnStarted(
            session_id=session_id, turn_id=turn_id, seq=0, max_attempts=max_attempts
        )
    return evolve(None, start, config, out)[0], log


def _tool_outcomes(turn: Turn, path: Path, config: CoreConfig, out: Outputs) -> bool:
    """A file of tool results for the step that awaits them: applied, and True."""
    ctx = AttemptContext(
        session_id=turn.session_id, turn_id=turn.turn_id, step=turn.step, attempt=turn.attempt
    )
    outcomes = _read(read_tool_outcomes, path, ctx, turn.last_seq + 1)
    if outcomes is None:
        return False
    if turn.state is not TurnState.AWAITING_STEP:
        raise SimulationError(f"{path}: tool results while the turn is {turn.state.value}")
    _apply_all(turn, outcomes, config, out, path)
    return True


def _read(reader: Callable[..., list[Located] | None], *args: Any) -> list[Located] | None:
    try:
        return reader(*args)
    except TranscriptError as exc:
        raise SimulationError(str(exc)) from None


def _apply_all(
    turn: Turn, events: list[Located], config: CoreConfig, out: Outputs, path: Path
) -> None:
    for event, line in events:
        _apply(turn, event, config, out, path, line)


_STARTABLE = frozenset((TurnState.PENDING, TurnState.RETRYING, TurnState.AWAITING_STEP))


def _run_attempt(
    turn: Turn,
    path: Path,
    provider: str | None,
    lenient: bool,
    config: CoreConfig,
    out: Outputs,
) -> None:
    step, attempt = _next_attempt(turn)
    ctx = AttemptContext(
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        step=step,
        attempt=attempt,
        provider=provider or "",
    )
    first_seq = turn.last_seq + 1 if turn.state is TurnState.PENDING else 0
    started = AttemptStarted(
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        step=step,
        attempt=attempt,
        seq=first_seq,
        provider=provider or "",
        contract=CONTRACTS.get(provider or "", "ai-sdk"),
        strict=not lenient,
    )
    events = _read(read_attempt, path, ctx, provider, first_seq)
    assert events is not None
    for event, line in _with_start(started, events):
        _apply(turn, event, config, out, path, line)


def _with_start(
    started: AttemptStarted, events: list[tuple[InboundEvent, int | None]]
) -> list[tuple[InboundEvent, int | None]]:
    """Normalized files may bring their own `attempt-started`; else the default one goes first."""
    if events and isinstance(events[0][0], AttemptStarted):
        return events
    return [(started, None), *events]


def _apply(
    turn: Turn,
    event: InboundEvent,
    config: CoreConfig,
    out: Outputs,
    path: Path,
    line: int | None,
) -> None:
    try:
        evolve(turn, event, config, out)
    except IllegalEvent as exc:
        where = f"{path}:{line}" if line is not None else str(path)
        raise SimulationError(f"{where}: {exc.reason}") from None


def _next_attempt(turn: Turn) -> tuple[int, int]:
    if turn.state is TurnState.RETRYING:
        return turn.step, turn.attempt + 1
    if turn.state is TurnState.AWAITING_STEP:
        return turn.step + 1, 1
    return turn.step, turn.attempt


def outcome_json(outcome: Outcome) -> bytes:
    """The outcome as indented JSON, the same bytes for the same inputs."""
    return msgspec.json.format(msgspec.json.encode(outcome), indent=2)
