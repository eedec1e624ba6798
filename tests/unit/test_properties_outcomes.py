"""How generated turns end: in the state the reference model says, and a failed turn with one
agent error as its last frame, a finished one with `turn_finished` (DESIGN section 8, invariant
6)."""

from __future__ import annotations

from factories import fold, frames_of
from hypothesis import given
from turn_generator import PROPERTY, GeneratedTurn, turns

from terminus.events.outbound import (
    AgentError,
    Retrying,
    RetryScheduled,
    TurnConcluded,
    TurnFinished,
)
from terminus.statemachines.states import FINAL_STATES, TurnState


@PROPERTY
@given(turns())
def test_generated_turns_end_where_the_model_says(turn_spec: GeneratedTurn) -> None:
    turn, out = fold(turn_spec.events)
    assert turn.state is turn_spec.state
    assert not out.ignored or set(out.ignored) <= {"eof", "late", "superseded", "duplicate"}


@PROPERTY
@given(turns())
def test_failed_turn_emits_one_agent_error_as_its_last_frame(turn_spec: GeneratedTurn) -> None:
    turn, out = fold(turn_spec.events)
    errors = frames_of(out, AgentError)
    if turn.state is TurnState.FAILED:
        assert len(errors) == 1
        assert out.frames[-1] is errors[0]
        assert not frames_of(out, TurnFinished)
    else:
        assert not errors
        assert isinstance(out.frames[-1], TurnFinished)


@PROPERTY
@given(turns())
def test_a_final_turn_gives_its_producer_one_turn_concluded_last(
    turn_spec: GeneratedTurn,
) -> None:
    turn, out = fold(turn_spec.events)
    ended = [c for c in out.commands if isinstance(c, TurnConcluded)]
    assert turn.state in FINAL_STATES
    assert len(ended) == 1
    assert out.commands[-1] is ended[0]
    assert ended[0].state == turn.state.value
    errors = frames_of(out, AgentError)
    assert ended[0].error == (errors[0].error if errors else None)
    retries = [c for c in out.commands if isinstance(c, RetryScheduled)]
    assert len(retries) == len(frames_of(out, Retrying))
