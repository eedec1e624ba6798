"""What the machine-rule tests share: the table as a mapping, and checks of a fold's outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from factories import (
    Script,
    frames_of,
)

from terminus.events.inbound import Usage
from terminus.events.outbound import (
    AgentError,
    AttemptDiscarded,
    Retrying,
    RetryScheduled,
    TurnConcluded,
)
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import TurnState
from terminus.statemachines.table import TABLE
from terminus.statemachines.turn import Turn

S = TurnState
STEP_USAGE = Usage(input_tokens=11, output_tokens=7)  # what Script.finish reports
Step = Callable[[Script], None]


def _sources(source: Any) -> list[TurnState]:
    return [TurnState(s) for s in source] if isinstance(source, list) else [TurnState(source)]


ALLOWED: dict[tuple[TurnState, str], TurnState] = {
    (source, str(trigger)): TurnState(dest)
    for trigger, sources, dest in TABLE
    for source in _sources(sources)
}


def table_rows(out: Outputs) -> set[tuple[str, str, str]]:
    return {(t.trigger, t.source, t.dest) for t in out.transitions}


def dests(out: Outputs) -> list[str]:
    return [t.dest for t in out.transitions]


def one_agent_error(out: Outputs) -> AgentError:
    found = frames_of(out, AgentError)
    assert len(found) == 1, out.frames
    return found[0]


def assert_truncated_then_retrying(turn: Turn, out: Outputs, reason: str) -> None:
    """Truncated with `reason`, discarded, and a retry of attempt 2 scheduled."""
    assert turn.state is S.RETRYING
    assert dests(out)[-2:] == ["truncated", "retrying"]
    assert turn.history[-1].outcome == "truncated"
    assert turn.history[-1].reason == reason
    discarded, retrying = out.frames[-2:]
    assert isinstance(discarded, AttemptDiscarded)
    assert (discarded.step, discarded.attempt, discarded.reason) == (1, 1, reason)
    assert isinstance(retrying, Retrying)
    assert (retrying.step, retrying.attempt, retrying.reason) == (1, 2, reason)
    assert retrying.max_attempts == 3
    assert retrying.error is None
    assert len(out.commands) == 1
    command = out.commands[0]
    assert isinstance(command, RetryScheduled)
    assert (command.step, command.attempt, command.reason) == (1, 2, reason)
    assert command.delay_ms == retrying.delay_ms > 0
    assert not frames_of(out, AgentError)
    assert not out.messages


def eof(s: Script) -> None:
    s.text(f"p{s.attempt}", "x")
    s.closed()


def run_attempts(s: Script, endings: list[Step]) -> None:
    for index, ending in enumerate(endings):
        if index:
            s.next_attempt()
        ending(s)


def assert_failed_on_attempt(turn: Turn, out: Outputs, attempt: int) -> None:
    assert turn.state is S.FAILED
    assert turn.attempt == attempt
    assert len(frames_of(out, Retrying)) == attempt - 1
    assert len([c for c in out.commands if isinstance(c, RetryScheduled)]) == attempt - 1
    error = one_agent_error(out).error
    assert isinstance(out.frames[-1], AgentError)
    ended = concluded(out)
    assert (ended.state, ended.stop_reason, ended.attempt, ended.error) == (
        "failed",
        "error",
        attempt,
        error,
    )


def concluded(out: Outputs) -> TurnConcluded:
    """The turn's one `turn_concluded` command, the last one it gave."""
    ended = [c for c in out.commands if isinstance(c, TurnConcluded)]
    assert len(ended) == 1
    assert out.commands[-1] is ended[0]
    return ended[0]


def streaming(s: Script) -> None:
    s.text("a", "partial ")
