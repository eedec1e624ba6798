"""A base and a tail that do not fit together are refused with a `SnapshotError`: a tail of
another attempt, one naming an unknown part, one without an open attempt."""

from __future__ import annotations

import pytest
from factories import Script
from snapshot_turns import encode, fold

from terminus.events.inbound import InboundEvent
from terminus.service.fold.snapshots import SnapshotError, Stored, TailLedger
from terminus.statemachines.turn import Turn


def stored_at(events: list[InboundEvent]) -> Stored:
    return TailLedger().store(fold(events))


def test_a_tail_of_another_attempt_is_refused() -> None:
    script = Script()
    script.text("a", "first")
    script.closed()
    first = len(script.events)
    script.next_attempt()
    script.text("a", "second")
    old, new = stored_at(script.events[:first]), stored_at(script.events)
    assert TailLedger().load(new.base, new.tail).current is not None
    with pytest.raises(SnapshotError, match="tail of another attempt"):
        TailLedger().load(new.base, old.tail)


def test_a_tail_naming_an_unknown_part_is_refused() -> None:
    script = Script()
    script.text("a", "Hi")
    stored = stored_at(script.events)
    assert stored.tail is not None
    with pytest.raises(SnapshotError, match="unknown part b"):
        TailLedger().load(stored.base, stored.tail + b'["b","x"]\n')


def test_a_tail_without_an_open_attempt_is_refused() -> None:
    turn = Turn(session_id="s", turn_id="t", max_attempts=3)
    with pytest.raises(SnapshotError, match="no open attempt"):
        TailLedger().load(encode(turn), b"[1,1]\n")
