"""Which attempt a producer may start next, decided where the mistake is made.

The workers accept one `attempt-started` only: attempt 1 of step 1 first, then either the next
attempt of the same step (a retry) or attempt 1 of the next step (after its tools). Anything else
they would dead-letter, and every event of that attempt with it, leaving the turn to the stall
timer; `AttemptOrder` refuses it in the producer at once instead.
"""

from __future__ import annotations

from terminus.service import TerminusError


class AttemptOrderError(TerminusError, ValueError):
    """An attempt that repeats or skips a number: the workers would refuse all of it."""


class AttemptOrder:
    """The (step, attempt) of a turn's current attempt, and the rule for the next one."""

    def __init__(self) -> None:
        self.step, self.attempt = 1, 1
        self.started = False

    def next(self, step: int | None = None, attempt: int | None = None) -> tuple[int, int]:
        """The attempt to start: `step` defaults to the current one (a retry), `attempt` to the
        one that follows in that step. Raises `AttemptOrderError` for any other."""
        want_step = self.step if step is None else step
        default = self.attempt + 1 if self.started and want_step == self.step else 1
        want = (want_step, default if attempt is None else attempt)
        if want != self._expected(want_step):
            raise AttemptOrderError(
                f"attempt {want[1]} of step {want[0]} cannot start after {self._current()}; "
                f"expected {self._allowed()}"
            )
        self.step, self.attempt = want
        self.started = True
        return want

    def _expected(self, step: int) -> tuple[int, int]:
        if not self.started:
            return 1, 1
        if step == self.step + 1:
            return step, 1
        return self.step, self.attempt + 1

    def _current(self) -> str:
        if not self.started:
            return "turn-started"
        return f"attempt {self.attempt} of step {self.step}"

    def _allowed(self) -> str:
        if not self.started:
            return "attempt 1 of step 1"
        return (
            f"attempt {self.attempt + 1} of step {self.step} (a retry) "
            f"or attempt 1 of step {self.step + 1} (the next step)"
        )
