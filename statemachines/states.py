"""The states of a turn (DESIGN section 3), plus `pending`: opened, no attempt started yet."""

from __future__ import annotations

from enum import StrEnum


class TurnState(StrEnum):
    PENDING = "pending"
    STREAMING = "streaming"
    AWAITING_TERMINAL = "awaiting_terminal"
    AWAITING_STEP = "awaiting_step"
    TRUNCATED = "truncated"
    RETRYING = "retrying"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATES: frozenset[TurnState] = frozenset(
    (TurnState.FINISHED, TurnState.FAILED, TurnState.CANCELLED)
)
OPEN_ATTEMPT_STATES: frozenset[TurnState] = frozenset(
    (TurnState.STREAMING, TurnState.AWAITING_TERMINAL)
)
