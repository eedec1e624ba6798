"""What a turn asks of its producer on the commands stream besides retries: run the tools a
step ended with, and stop once the turn is final (DESIGN section 1)."""

from __future__ import annotations

from factories import Script, fold
from machine_checks import S, concluded

from terminus.events.outbound import RequestedTool, ToolsRequired


def test_a_step_proven_with_tool_calls_asks_for_the_calls_without_an_outcome() -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "let me look")
    s.tool_call("c1", q="x")
    s.tool_call("c2", name="fetch", url="u")
    s.tool_error("c2", "refused early")
    s.finish("tool-calls", "tool_use")
    s.terminal("message_stop")
    turn, out = fold(s.events)
    assert turn.state is S.AWAITING_STEP
    assert out.commands == [
        ToolsRequired(
            session_id=s.session_id,
            turn_id=s.turn_id,
            step=2,
            attempt=1,
            tools=[RequestedTool(tool_call_id="c1", tool_name="search", input={"q": "x"})],
        )
    ]


def test_ending_the_turn_after_its_tools_concludes_it_finished() -> None:
    s = Script()
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1")
    s.ended()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [type(c).__name__ for c in out.commands] == ["ToolsRequired", "TurnConcluded"]
    assert (concluded(out).state, concluded(out).step) == ("finished", 1)


def test_a_cancelled_turn_tells_its_producer_to_stop() -> None:
    s = Script()
    s.text("a", "half an ans")
    s.cancelled()
    turn, out = fold(s.events)
    assert turn.state is S.CANCELLED
    assert out.commands == [concluded(out)]
    assert (concluded(out).state, concluded(out).stop_reason) == ("cancelled", "cancelled")
