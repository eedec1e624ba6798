"""Tool calls, cancellation and partial records (DESIGN section 3)."""

from __future__ import annotations

import pytest
from factories import (
    Script,
    fold,
    frames_of,
)
from machine_checks import (
    STEP_USAGE,
    S,
    Step,
    assert_failed_on_attempt,
    concluded,
    eof,
    run_attempts,
    streaming,
)

from terminus.events.outbound import (
    AgentError,
    AttemptDiscarded,
    MessageCommitted,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolPart,
    TurnFinished,
)
from terminus.statemachines.config import CoreConfig

# --- tool calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("input_started", [True, False])
def test_tool_error_before_its_tool_call_is_kept(input_started: bool) -> None:
    s = Script()
    if input_started:
        s.tool_input("c1")
    s.tool_error("c1", "sandbox refused")
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")
    s.ended()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    tools = [p for p in out.messages[-1].parts if isinstance(p, ToolPart)]
    assert tools == [
        ToolPart(
            tool_call_id="c1",
            name="search",
            input={"q": "x"},
            state="error",
            error="sandbox refused",
        )
    ]


def test_max_tokens_inside_an_unclosed_tool_block_finishes_with_an_incomplete_tool() -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "let me look")
    s.tool_input("c1", delta='{"q": "par')
    s.finish("length", "max_tokens")
    s.terminal("message_stop")
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["max_tokens"]
    assert out.commands == [concluded(out)]
    assert (concluded(out).state, concluded(out).stop_reason) == ("finished", "max_tokens")
    message = out.messages[-1]
    assert message.finish_reason == "length"
    (tool,) = [p for p in message.parts if isinstance(p, ToolPart)]
    assert (tool.tool_call_id, tool.state, tool.output) == ("c1", "incomplete", None)


def test_tool_calls_step_awaits_the_next_step_which_commits_it() -> None:
    s = Script()
    s.text("a", "searching")
    s.tool_input("c1")
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")
    turn, out = fold(s.events)
    assert turn.state is S.AWAITING_STEP
    assert not out.messages
    assert not frames_of(out, MessageCommitted)
    s.tool_result("c1", "42")
    s.next_step()
    turn, out = fold(s.events)
    assert turn.state is S.STREAMING
    committed = frames_of(out, MessageCommitted)
    assert [c.step for c in committed] == [1]
    assert out.messages[-1].finish_reason == "tool-calls"
    s.text("b", "the answer is 42")
    s.prove()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [c.step for c in frames_of(out, MessageCommitted)] == [1, 2]
    assert out.messages[-1].parts == [
        StepStartPart(step=1),
        TextPart(part_id="a", text="searching"),
        ToolPart(
            tool_call_id="c1", name="search", input={"q": "x"}, state="completed", output="42"
        ),
        StepFinishPart(step=1, finish_reason="tool-calls", usage=STEP_USAGE),
        StepStartPart(step=2),
        TextPart(part_id="b", text="the answer is 42"),
        StepFinishPart(step=2, finish_reason="stop", usage=STEP_USAGE),
    ]
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["end_turn"]


def test_turn_ended_in_awaiting_step_finishes_and_commits() -> None:
    s = Script()
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1")
    s.ended()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [c.step for c in frames_of(out, MessageCommitted)] == [1]
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["end_turn"]
    assert isinstance(out.frames[-1], TurnFinished)


# --- cancellation ----------------------------------------------------------------------------


def _retrying(s: Script) -> None:
    eof(s)


def _awaiting_step(s: Script) -> None:
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")


@pytest.mark.parametrize(
    ("before", "discarded", "committed"),
    [
        pytest.param(streaming, [["a"]], 0, id="streaming"),
        pytest.param(_retrying, [["p1"]], 0, id="retrying"),
        pytest.param(_awaiting_step, [], 1, id="awaiting-step"),
    ],
)
def test_turn_cancelled_ends_the_turn_cancelled(
    before: Step, discarded: list[list[str]], committed: int
) -> None:
    s = Script()
    before(s)
    s.cancelled()
    turn, out = fold(s.events)
    assert turn.state is S.CANCELLED
    assert [f.part_ids for f in frames_of(out, AttemptDiscarded)] == discarded
    assert len(frames_of(out, MessageCommitted)) == committed
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["cancelled"]
    assert isinstance(out.frames[-1], TurnFinished)
    assert not frames_of(out, AgentError)


# --- partial records -------------------------------------------------------------------------


@pytest.mark.parametrize("keep_partial", [True, False])
def test_exhaustion_keeps_or_discards_the_partial(keep_partial: bool) -> None:
    s = Script()
    run_attempts(s, [eof] * 3)
    turn, out = fold(s.events, CoreConfig(keep_partial=keep_partial))
    assert_failed_on_attempt(turn, out, 3)
    last_discard = frames_of(out, AttemptDiscarded)[-1]
    if keep_partial:
        (partial,) = out.partials
        assert (partial.attempt, partial.reason) == (3, "missing_terminal")
        assert partial.parts == [TextPart(part_id="p3", text="x")]
        assert last_discard.attempt == 2
    else:
        assert not out.partials
        assert (last_discard.attempt, last_discard.part_ids) == (3, ["p3"])
        assert out.frames[-2] == last_discard
    assert not out.messages
