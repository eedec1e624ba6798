"""Final turns are stored whole and drop the tail they had; a new attempt drops the old attempt's
tail and writes its own anew (service/fold/snapshots.py)."""

from __future__ import annotations

from factories import Script
from snapshot_turns import BASE, encode, fold, lines

from terminus.events.inbound import TextDelta
from terminus.service.fold.snapshots import Stored, TailLedger
from terminus.statemachines.states import TurnState


def test_a_final_turn_is_stored_whole_and_drops_the_tail_it_had() -> None:
    script = Script()
    script.text("a", "Hel", "lo")
    proven = len(script.events)
    script.prove()
    ledger = TailLedger()
    turn = fold(script.events[:proven])
    assert ledger.store(turn).tail is not None
    turn = fold(script.events[proven:], turn)
    assert turn.state is TurnState.FINISHED
    stored = ledger.store(turn)
    assert stored == Stored(encode(turn), None, append=False, drop_tail=True)
    assert turn.current is not None
    assert BASE.decode(stored.base).current == turn.current  # the text is inside the base
    assert ledger.store(turn) == Stored(encode(turn)), "the tail is gone already"


def test_a_turn_final_within_its_first_batch_has_no_tail_to_drop() -> None:
    script = Script()
    script.text("a", "Hi")
    script.prove()
    assert TailLedger().store(fold(script.events)) == Stored(encode(fold(script.events)))


def test_a_cancelled_turn_drops_its_tail() -> None:
    script = Script()
    script.text("a", "Hi")
    cancelled = len(script.events)
    script.cancelled()
    ledger = TailLedger()
    turn = fold(script.events[:cancelled])
    assert ledger.store(turn).tail is not None
    turn = fold(script.events[cancelled:], turn)
    assert turn.state is TurnState.CANCELLED
    assert ledger.store(turn) == Stored(encode(turn), drop_tail=True)


def test_a_new_attempt_drops_the_old_tail_then_writes_its_own_anew() -> None:
    script = Script()
    script.text("a", "cut")
    script.closed()
    retried = len(script.events)
    script.next_attempt()
    started = len(script.events)
    script.emit(TextDelta, part_id="b", delta="again")
    ledger = TailLedger()
    turn = fold(script.events[:retried])
    assert turn.state is TurnState.RETRYING
    assert lines(ledger.store(turn).tail) == [[1, 1], ["a", "cut"]]
    turn = fold(script.events[retried:started], turn)
    assert ledger.store(turn) == Stored(encode(turn), drop_tail=True)  # no text yet: whole
    turn = fold(script.events[started:], turn)
    stored = ledger.store(turn)
    assert not stored.append
    assert lines(stored.tail) == [[1, 2], ["b", "again"]]
