"""`PersistedMessage`, exported by `terminus`, reads as an answer: `text()` is its text parts'
text in order, across steps, without reasoning, tool calls or their results; `reasoning()` is the
reasoning alone. Both join the way `LiveSession` does, so a UI's last view of a turn and the
message it committed say the same."""

from __future__ import annotations

import terminus
from terminus.events.inbound import Usage
from terminus.events.outbound import (
    AgentMessageChunk,
    AgentThoughtChunk,
    PersistedMessage,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolPart,
)
from terminus.service.sdk.live import LiveSession
from terminus.service.sdk.updates import Update


def message() -> PersistedMessage:
    stop = StepFinishPart(step=2, finish_reason="stop", usage=Usage())
    return PersistedMessage(
        message_id="msg-t",
        session_id="s",
        turn_id="t",
        parts=[
            StepStartPart(step=1),
            ReasoningPart(part_id="r1", text="Think first. "),
            TextPart(part_id="p1", text="Let me look "),
            TextPart(part_id="p2", text="that up."),
            ToolPart(
                tool_call_id="c1", name="lookup", input={"q": 1}, state="completed", output="42"
            ),
            StepFinishPart(step=1, finish_reason="tool-calls", usage=Usage()),
            StepStartPart(step=2),
            ReasoningPart(part_id="r2", text="It is 42."),
            TextPart(part_id="p1", text=" The answer is 42."),
            stop,
        ],
        finish_reason="stop",
        usage=Usage(),
        provider="p",
        model="m",
    )


def test_persisted_message_is_exported_by_terminus() -> None:
    assert terminus.PersistedMessage is PersistedMessage
    assert "PersistedMessage" in terminus.__all__


def test_text_joins_the_text_parts_in_order_and_leaves_reasoning_out() -> None:
    assert message().text() == "Let me look that up. The answer is 42."
    assert message().reasoning() == "Think first. It is 42."


def test_a_message_without_text_reads_empty() -> None:
    bare = PersistedMessage(
        message_id="m",
        session_id="s",
        turn_id="t",
        parts=[StepStartPart(step=1)],
        finish_reason="stop",
        usage=Usage(),
        provider="p",
        model="m",
    )
    assert bare.text() == ""
    assert bare.reasoning() == ""


def test_the_text_is_what_the_live_view_showed() -> None:
    view = LiveSession()
    step = 1
    for n, part in enumerate(message().parts):
        cursor = f"{n + 1}-0"
        if isinstance(part, StepStartPart):
            step = part.step
        elif isinstance(part, TextPart):
            chunk = AgentMessageChunk(
                session_id="s",
                turn_id="t",
                step=step,
                attempt=1,
                part_id=part.part_id,
                delta=part.text,
            )
            view.apply(Update(cursor, chunk))
        elif isinstance(part, ReasoningPart):
            thought = AgentThoughtChunk(
                session_id="s",
                turn_id="t",
                step=step,
                attempt=1,
                part_id=part.part_id,
                delta=part.text,
            )
            view.apply(Update(cursor, thought))
    assert view.text("t") == message().text()
    assert view.reasoning("t") == message().reasoning()
