"""Export of a persisted turn to provider message lists keeps tool_use/tool_result adjacency."""

from __future__ import annotations

from typing import Any

from factories import Script, fold
from hypothesis import given, settings
from turn_generator import GeneratedTurn, final_message, turns

from terminus.events.outbound import PersistedMessage
from terminus.statemachines.export import to_anthropic, to_openai


def two_step_message() -> PersistedMessage:
    s = Script(contract="ai-sdk")
    s.reasoning("r1", "think", signature="sig")
    s.reasoning("r2", "unsigned")
    s.text("t1", "Looking")
    s.tool_call("c1", q="a")
    s.tool_call("c2", q="b")
    s.tool_input("c3")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1", "one")
    s.tool_error("c2", "denied")
    s.next_step()
    s.text("t2", "Done")
    s.prove()
    _, out = fold(s.events)
    assert out.messages
    return out.messages[-1]


def test_anthropic_export_pairs_every_tool_use_with_the_next_message() -> None:
    exported = to_anthropic(two_step_message())
    assert [m["role"] for m in exported] == ["assistant", "user", "assistant"]
    first = exported[0]["content"]
    assert [b["type"] for b in first] == ["thinking", "text", "tool_use", "tool_use"]
    assert exported[1]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "denied", "is_error": True},
    ]
    assert exported[2]["content"] == [{"type": "text", "text": "Done"}]


def test_openai_export_follows_tool_calls_with_tool_messages() -> None:
    exported = to_openai(two_step_message())
    assert [m["role"] for m in exported] == ["assistant", "tool", "tool", "assistant"]
    calls = exported[0]["tool_calls"]
    assert [c["id"] for c in calls] == ["c1", "c2"]
    assert calls[0]["function"] == {"name": "search", "arguments": '{"q":"a"}'}
    assert [m["tool_call_id"] for m in exported[1:3]] == ["c1", "c2"]
    assert exported[3] == {"role": "assistant", "content": "Done"}


def test_incomplete_tool_calls_are_never_exported() -> None:
    exported = two_step_message()
    ids = {b.get("id") for m in to_anthropic(exported) for b in m["content"]}
    assert "c3" not in ids
    assert all(c["id"] != "c3" for m in to_openai(exported) for c in m.get("tool_calls", []))


def anthropic_pairs_ok(messages: list[dict[str, Any]]) -> bool:
    for index, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if not uses:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is None or following["role"] != "user":
            return False
        if [b["tool_use_id"] for b in following["content"]] != uses:
            return False
    return True


def openai_pairs_ok(messages: list[dict[str, Any]]) -> bool:
    for index, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls", [])]
        answered = [m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(ids)]]
        if ids and answered != ids:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(turns())
def test_exports_of_generated_turns_keep_adjacency(turn_spec: GeneratedTurn) -> None:
    _, out = fold(turn_spec.events)
    message = final_message(out)
    if message is None:
        return
    assert anthropic_pairs_ok(to_anthropic(message))
    assert openai_pairs_ok(to_openai(message))
