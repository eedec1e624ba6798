"""Whole snapshots, written before tails existed, load and get a fresh tail; a loaded tail is
appended to, not rewritten; a forgotten turn's next tail is a fresh one."""

from __future__ import annotations

from snapshot_turns import encode, fold, lines, streaming

from terminus.service.fold.snapshots import TailLedger, assemble


def test_a_whole_snapshot_of_an_open_turn_loads_and_gets_a_fresh_tail() -> None:
    turn, deltas = streaming(3)
    fold(deltas[:2], turn)
    whole = encode(turn)  # what older code stored: the chunks inside, no tail
    ledger = TailLedger()
    loaded = ledger.load(whole, None)
    assert encode(loaded) == whole
    assert assemble({"t": whole, "gone": None}, {}) == {"t": loaded, "gone": None}
    fold(deltas[2:], loaded)
    stored = ledger.store(loaded)
    assert not stored.append, "no tail was ever written: the first one is set, not appended"
    assert lines(stored.tail) == [[1, 1], *(["a", f"zebra-{n};"] for n in range(3))]
    assert b"zebra" not in stored.base
    assert encode(TailLedger().load(stored.base, stored.tail)) == encode(loaded)


def test_a_loaded_tail_is_appended_to_not_rewritten() -> None:
    turn, deltas = streaming(3)
    fold(deltas[:2], turn)
    first = TailLedger().store(turn)
    ledger = TailLedger()  # another owner takes the turn over
    loaded = ledger.load(first.base, first.tail)
    fold(deltas[2:], loaded)
    stored = ledger.store(loaded)
    assert stored.append
    assert lines(stored.tail) == [["a", "zebra-2;"]]
    assert first.tail is not None
    assert stored.tail is not None
    assert encode(TailLedger().load(stored.base, first.tail + stored.tail)) == encode(loaded)


def test_forgetting_a_turn_makes_its_next_tail_a_fresh_one() -> None:
    turn, deltas = streaming(2)
    ledger = TailLedger()
    fold(deltas[:1], turn)
    ledger.store(turn)
    fold(deltas[1:], turn)
    ledger.forget(turn.turn_id)
    stored = ledger.store(turn)
    assert not stored.append
    assert lines(stored.tail) == [[1, 1], ["a", "zebra-0;"], ["a", "zebra-1;"]]
