"""The transition table and the terminal contracts (DESIGN section 3)."""

from __future__ import annotations

import pytest
from factories import (
    CONTRACTS,
    FINISH_PROVES,
    OVERLOADED_BODY,
    STRICT_TERMINAL,
    Script,
    fold,
    frames_of,
)
from machine_checks import (
    ALLOWED,
    S,
    table_rows,
)

from terminus.events.inbound import Contract
from terminus.events.outbound import TurnFinished
from terminus.statemachines.errors import IllegalTransition
from terminus.statemachines.states import FINAL_STATES, TurnState
from terminus.statemachines.table import TRIGGERS, advance

# --- the transition table --------------------------------------------------------------------


@pytest.mark.parametrize("state", list(TurnState))
@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
def test_table_is_the_authority_for_every_state_and_trigger(state: TurnState, trigger: str) -> None:
    if (state, trigger) in ALLOWED:
        assert advance(state, trigger) is ALLOWED[(state, trigger)]
    else:
        with pytest.raises(IllegalTransition):
            advance(state, trigger)


@pytest.mark.parametrize("state", list(TurnState))
def test_unknown_trigger_is_illegal(state: TurnState) -> None:
    with pytest.raises(IllegalTransition):
        advance(state, "teleport")


@pytest.mark.parametrize("state", sorted(FINAL_STATES))
def test_final_states_have_no_outgoing_transition(state: TurnState) -> None:
    assert not [key for key in ALLOWED if key[0] is state]
    for trigger in TRIGGERS:
        with pytest.raises(IllegalTransition):
            advance(state, trigger)


def test_every_transition_the_fold_records_is_a_table_row() -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "x")
    s.closed()
    s.next_attempt()
    s.error(529, OVERLOADED_BODY)
    s.next_attempt()
    s.tool_input("c1")
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1")
    s.next_step()
    s.text("b", "y")
    s.prove()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    rows = {(trigger, source.value, dest.value) for (source, trigger), dest in ALLOWED.items()}
    assert table_rows(out) <= rows


# --- terminal contracts ----------------------------------------------------------------------


@pytest.mark.parametrize(("contract", "strict"), CONTRACTS)
def test_terminal_contract_decides_what_proves_a_finish(contract: Contract, strict: bool) -> None:
    s = Script(contract=contract, strict=strict)
    s.text("a", "hello")
    s.finish("stop")
    turn, _ = fold(s.events)
    if (contract, strict) in FINISH_PROVES:
        assert turn.state is S.FINISHED
        return
    assert turn.state is S.AWAITING_TERMINAL
    s.terminal(STRICT_TERMINAL[contract])
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["end_turn"]
