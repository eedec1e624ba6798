"""The tail of an open turn: its base leaves the open attempt's text out and stays the same size
while the text grows, each batch appends only the chunks new since the last one, and storing
leaves the turn in memory as it was (service/fold/snapshots.py)."""

from __future__ import annotations

from factories import Script
from snapshot_turns import fold, lines, streaming

from terminus.events.inbound import ReasoningDelta, TextDelta, TextStart
from terminus.service.fold.snapshots import TailLedger


def test_the_base_stays_the_same_size_while_the_text_grows() -> None:
    turn, deltas = streaming(300)
    ledger = TailLedger()
    sizes: list[int] = []
    for n, delta in enumerate(deltas):
        fold([delta], turn)
        chunks = turn.current.texts["a"].chunks if turn.current else []
        stored = ledger.store(turn)
        assert turn.current is not None
        assert turn.current.texts["a"].chunks is chunks, "the chunk list itself is put back"
        assert len(chunks) == n + 1
        assert b"zebra" not in stored.base
        assert stored.append is (n > 0)
        header = [[1, 1]] if n == 0 else []
        assert lines(stored.tail) == [*header, ["a", f"zebra-{n};"]]
        sizes.append(len(stored.base))
    assert sum(len(d.delta) for d in deltas if isinstance(d, TextDelta)) > 2_000
    assert max(sizes) - min(sizes) <= 4  # only last_seq grows, a few bytes at most


def test_each_batch_appends_only_the_chunks_new_since_the_last_one() -> None:
    script = Script()
    script.emit(TextStart, part_id="a")
    script.emit(TextDelta, part_id="a", delta="one")
    first = len(script.events)
    script.emit(ReasoningDelta, part_id="r", delta="why")
    script.emit(TextDelta, part_id="a", delta="two")
    script.emit(TextDelta, part_id="a", delta="three")
    ledger = TailLedger()
    turn = fold(script.events[:first])
    assert lines(ledger.store(turn).tail) == [[1, 1], ["a", "one"]]
    turn = fold(script.events[first:], turn)
    stored = ledger.store(turn)
    assert stored.append
    assert lines(stored.tail) == [["a", "two"], ["a", "three"], ["r", "why"]]
    unchanged = ledger.store(turn)
    assert (unchanged.tail, unchanged.append, unchanged.drop_tail) == (None, True, False)
