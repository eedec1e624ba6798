"""Errors of the pure core.

CoreError
 +-- IllegalEvent        the event cannot apply to the turn (dead-letter it with `reason`)
      +-- IllegalTransition  the transition table has no row for it
"""

from __future__ import annotations


class CoreError(ValueError):
    """Root of every error the core raises."""


class IllegalEvent(CoreError):
    """The event is inconsistent with its turn; `reason` says why, for the dead-letter stream."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class IllegalTransition(IllegalEvent):
    """The table has no transition for this trigger from this state."""

    def __init__(self, state: str, trigger: str) -> None:
        super().__init__(f"no transition '{trigger}' from state '{state}'")
        self.state = state
        self.trigger = trigger
