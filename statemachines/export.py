"""Export a persisted turn to provider message lists, keeping tool_use/tool_result adjacency.

Each step becomes one assistant message; its answered tool calls are followed at once by their
results (an Anthropic `user` message of `tool_result` blocks, or OpenAI `tool` messages). Incomplete
tool calls were never executed, so they are left out rather than paired with an invented result.
"""

from __future__ import annotations

from typing import Any

import msgspec

from terminus.events.outbound import (
    MessagePart,
    PersistedMessage,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolPart,
)

Json = dict[str, Any]


def steps_of(message: PersistedMessage) -> list[list[MessagePart]]:
    """The content parts of each step, without the step markers."""
    steps: list[list[MessagePart]] = []
    for part in message.parts:
        if isinstance(part, StepStartPart):
            steps.append([])
        elif not isinstance(part, StepFinishPart) and steps:
            steps[-1].append(part)
    return steps


def _answered(parts: list[MessagePart]) -> list[ToolPart]:
    return [p for p in parts if isinstance(p, ToolPart) and p.state != "incomplete"]


def _result_text(tool: ToolPart) -> str:
    return (
        tool.output if tool.state == "completed" and tool.output is not None else tool.error or ""
    )


def to_anthropic(message: PersistedMessage) -> list[Json]:
    """Anthropic Messages API `messages`: assistant blocks, then tool results in the next turn."""
    messages: list[Json] = []
    for parts in steps_of(message):
        blocks = [b for p in parts if (b := _anthropic_block(p)) is not None]
        if blocks:
            messages.append({"role": "assistant", "content": blocks})
        results = [_anthropic_result(t) for t in _answered(parts)]
        if results:
            messages.append({"role": "user", "content": results})
    return messages


def _anthropic_block(part: MessagePart) -> Json | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ReasoningPart):
        # Anthropic rejects thinking blocks without their signature.
        if part.signature is None:
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolPart) and part.state != "incomplete":
        return {
            "type": "tool_use",
            "id": part.tool_call_id,
            "name": part.name,
            "input": part.input or {},
        }
    return None


def _anthropic_result(tool: ToolPart) -> Json:
    block: Json = {
        "type": "tool_result",
        "tool_use_id": tool.tool_call_id,
        "content": _result_text(tool),
    }
    if tool.state == "error":
        block["is_error"] = True
    return block


def to_openai(message: PersistedMessage) -> list[Json]:
    """OpenAI Chat `messages`: assistant with tool_calls, then one `tool` message per call."""
    messages: list[Json] = []
    for parts in steps_of(message):
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        tools = _answered(parts)
        if not text and not tools:
            continue
        assistant: Json = {"role": "assistant", "content": text or None}
        if tools:
            assistant["tool_calls"] = [_openai_call(t) for t in tools]
        messages.append(assistant)
        messages.extend(
            {"role": "tool", "tool_call_id": t.tool_call_id, "content": _result_text(t)}
            for t in tools
        )
    return messages


def _openai_call(tool: ToolPart) -> Json:
    arguments = msgspec.json.encode(tool.input or {}).decode()
    return {
        "id": tool.tool_call_id,
        "type": "function",
        "function": {"name": tool.name, "arguments": arguments},
    }
