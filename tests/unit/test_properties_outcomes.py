"""How generated turns end: in the state the reference model says, and a failed turn with one
agent error as its last frame, a finished one with `turn_finished` (DESIGN section 8, invariant
6)."""

from __future__ import annotations

from factories import fold, frames_of
from hypothesis import given
from turn_generator import PROPERTY, GeneratedTurn, turns

from terminus.events.outbound import AgentError, TurnFinished
from terminus.statemachines.states import TurnState


@PROPERTY
@given(turns())
def test_generated_turns_end_where_the_model_says(turn_spec: GeneratedTurn) -> None:
    turn, out = fold(turn_spec.events)
    assert turn.state is turn_spec.state
    assert not out.ignored or set(out.ignored) <= {"late", "superseded", "duplicate"}


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
