"""A cancel from outside the producer (a user's Stop, an operator) ends a live turn wherever it
is, once: the open attempt's parts are discarded, subscribers get one turn_finished saying so, and
the producer one turn_concluded telling it to stop (DESIGN section 3, `cancelled`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from factories import Script, fold, frames_of
from machine_checks import S, concluded, eof

from terminus.events.outbound import AttemptDiscarded, TurnFinished
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs


def streaming(s: Script) -> None:
    s.text("a", "half an ans")


def awaiting_terminal(s: Script) -> None:
    s.text("a", "done")
    s.finish("stop", "end_turn")


def retrying(s: Script) -> None:
    eof(s)


def awaiting_step(s: Script) -> None:
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")


WHERE: dict[str, tuple[Callable[[Script], None], S]] = {
    "streaming": (streaming, S.STREAMING),
    "awaiting_terminal": (awaiting_terminal, S.AWAITING_TERMINAL),
    "retrying": (retrying, S.RETRYING),
    "awaiting_step": (awaiting_step, S.AWAITING_STEP),
}


@pytest.mark.parametrize("where", list(WHERE))
def test_a_cancel_from_outside_ends_a_live_turn_wherever_it_is(where: str) -> None:
    s = Script(contract="anthropic-messages")
    build, state = WHERE[where]
    build(s)
    turn, _ = fold(s.events)
    assert turn.state is state
    last_seq = turn.last_seq
    s.cancelled_from_outside()
    out = Outputs()
    turn, _ = evolve(turn, s.events[-1], out=out)
    assert turn.state is S.CANCELLED
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["cancelled"]
    assert out.commands == [concluded(out)]
    assert concluded(out).state == "cancelled"
    discarded = frames_of(out, AttemptDiscarded)
    open_attempt = where in ("streaming", "awaiting_terminal")
    assert [d.part_ids for d in discarded] == ([["a"]] if open_attempt else [])
    assert turn.last_seq == last_seq, "the producer's numbering is not moved"
    if where == "awaiting_step":  # the proven step stays
        assert concluded(out).message_id == f"msg-{s.turn_id}"


def test_a_second_cancel_and_the_producers_events_after_it_are_late() -> None:
    s = Script()
    streaming(s)
    s.cancelled_from_outside()
    after = len(s.events)
    s.cancelled_from_outside("again")
    s.text("a", "more")
    turn, out = fold(s.events)
    assert turn.state is S.CANCELLED
    assert len(frames_of(out, TurnFinished)) == 1
    assert turn.ignored == {"late": len(s.events) - after}


def test_a_cancel_after_the_end_changes_nothing() -> None:
    s = Script()
    s.text("a", "done")
    s.prove()
    turn, _ = fold(s.events)
    s.cancelled_from_outside()
    out = Outputs()
    turn, _ = evolve(turn, s.events[-1], out=out)
    assert turn.state is S.FINISHED
    assert out == Outputs(ignored=["late"])
