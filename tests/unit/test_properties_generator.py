"""The turn generator itself: it is not vacuous (every ending, retried then proven steps,
finished and failed turns), and every turn it draws opens with `turn-started` at seq 0."""

from __future__ import annotations

from hypothesis import given, settings
from turn_generator import ENDINGS, GeneratedTurn, turns

from terminus.events.inbound import AttemptStarted, TurnStarted
from terminus.statemachines.states import TurnState


def test_generator_covers_every_ending_and_both_outcomes() -> None:
    """The strategy is not vacuous: proofs, every failure kind, finished and failed turns."""
    seen_endings: set[str] = set()
    seen_states: set[TurnState] = set()
    retried_then_proven = False

    @settings(max_examples=300, deadline=None, database=None)
    @given(turns())
    def collect(turn_spec: GeneratedTurn) -> None:
        nonlocal retried_then_proven
        seen_endings.update(a.ending for a in turn_spec.attempts)
        seen_states.add(turn_spec.state)
        retried_then_proven |= any(p.attempt > 1 for p in turn_spec.proven.values())

    collect()
    assert seen_endings == set(ENDINGS)
    assert seen_states == {TurnState.FINISHED, TurnState.FAILED}
    assert retried_then_proven


def test_turn_started_is_the_first_generated_event() -> None:
    @settings(max_examples=20, deadline=None, database=None)
    @given(turns())
    def check(turn_spec: GeneratedTurn) -> None:
        first, second = turn_spec.events[:2]
        assert isinstance(first, TurnStarted)
        assert first.seq == 0
        assert isinstance(second, AttemptStarted)
        assert (second.step, second.attempt, second.seq) == (1, 1, 1)

    check()
