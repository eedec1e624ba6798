"""What the fold persists of generated turns: DESIGN section 8 invariants 1-3 (one step-start
and one step-finish around each step's parts, only parts of the attempt that got proof, tools
after text), and each step's parts exactly as its proven attempt streamed them."""

from __future__ import annotations

from factories import fold
from hypothesis import given
from turn_generator import PROPERTY, GeneratedTurn, final_message, turns

from terminus.events.outbound import (
    MessagePart,
    PersistedMessage,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolPart,
)


def steps_of(message: PersistedMessage) -> dict[int, list[MessagePart]]:
    """The content parts of each step; asserts one step-start and one step-finish around each."""
    steps: dict[int, list[MessagePart]] = {}
    open_step: int | None = None
    for part in message.parts:
        if isinstance(part, StepStartPart):
            assert open_step is None, message.parts
            assert part.step not in steps, message.parts
            open_step, steps[part.step] = part.step, []
        elif isinstance(part, StepFinishPart):
            assert part.step == open_step, message.parts
            open_step = None
        else:
            assert open_step is not None, message.parts
            steps[open_step].append(part)
    assert open_step is None, message.parts
    return steps


def part_id_of(part: MessagePart) -> str:
    if isinstance(part, TextPart | ReasoningPart):
        return part.part_id
    assert isinstance(part, ToolPart)
    return part.tool_call_id


@PROPERTY
@given(turns())
def test_persisted_messages_keep_invariants_1_to_3(turn_spec: GeneratedTurn) -> None:
    _, out = fold(turn_spec.events)
    message = final_message(out)
    if not turn_spec.proven:
        assert message is None
        return
    assert message is not None
    steps = steps_of(message)
    assert sorted(steps) == sorted(turn_spec.proven)
    finishes = {p.step: p.finish_reason for p in message.parts if isinstance(p, StepFinishPart)}
    kept = {(a.step, a.attempt) for a in turn_spec.proven.values()}
    discarded: set[str] = set()
    for attempt in turn_spec.attempts:
        if (attempt.step, attempt.attempt) not in kept:
            discarded |= attempt.part_ids
    for step, parts in steps.items():
        proof = turn_spec.proven[step]
        assert finishes[step] == proof.finish_reason
        ids = {part_id_of(p) for p in parts}
        assert ids <= proof.part_ids
        assert not ids & discarded
        seen_tool = False
        for part in parts:
            if isinstance(part, ToolPart):
                seen_tool = True
                assert part.state in ("completed", "error", "incomplete")
                assert part.state != "completed" or part.output is not None
            else:
                assert not seen_tool, f"text after a tool part in step {step}: {parts}"


@PROPERTY
@given(turns())
def test_each_step_persists_exactly_the_attempt_that_got_proof(turn_spec: GeneratedTurn) -> None:
    _, out = fold(turn_spec.events)
    message = final_message(out)
    steps = steps_of(message) if message is not None else {}
    for step, proof in turn_spec.proven.items():
        texts = [
            ("text" if isinstance(p, TextPart) else "reasoning", p.part_id, p.text)
            for p in steps[step]
            if isinstance(p, TextPart | ReasoningPart)
        ]
        tools = [(p.tool_call_id, p.state) for p in steps[step] if isinstance(p, ToolPart)]
        assert texts == proof.texts
        assert tools == proof.tool_states()
