"""A partition owner's phases as data (service/runtime/owner.py, issue 16): the table the pump
and the owner both follow, checked as a graph."""

from __future__ import annotations

import pytest

from terminus.service.runtime.owner import MOVES, STARTING, Phase, PhaseError, moved


def reachable(start: Phase) -> set[Phase]:
    seen, todo = {start}, [start]
    while todo:
        phase = todo.pop()
        for (source, _), dest in MOVES.items():
            if source is phase and dest not in seen:
                seen.add(dest)
                todo.append(dest)
    return seen


def test_a_new_owner_can_reach_every_phase() -> None:
    assert reachable(Phase.START) == set(Phase)


@pytest.mark.parametrize("phase", [p for p in Phase if p is not Phase.ENDED])
def test_every_phase_can_break_and_end(phase: Phase) -> None:
    assert moved(phase, "broke") is Phase.RESTART
    assert moved(phase, "ended") is Phase.ENDED


def test_an_ended_owner_never_moves_again() -> None:
    assert not [key for key in MOVES if key[0] is Phase.ENDED]
    with pytest.raises(PhaseError):
        moved(Phase.ENDED, "broke")


def test_only_a_started_owner_reads_folds_or_waits() -> None:
    for phase in STARTING:
        for happened in ("read", "caught_up", "folded", "woken"):
            with pytest.raises(PhaseError):
                moved(phase, happened)


def test_a_batch_is_folded_only_after_a_read_and_committed_before_the_next() -> None:
    assert moved(Phase.READ, "folded") is Phase.COMMIT
    with pytest.raises(PhaseError):
        moved(Phase.COMMIT, "folded")  # two batches in hand: one would never be committed
    with pytest.raises(PhaseError):
        moved(Phase.WAIT, "folded")
    assert moved(Phase.COMMIT, "read") is Phase.READ
    assert moved(Phase.COMMIT, "caught_up") is Phase.WAIT
