"""What the AI SDK builds from a UI message stream, for the projection's properties.

A small model of `processUIMessageStream` (ai `src/ui/process-ui-message-stream.ts`, 6.0.326 and
7.0.173): `start-step` pushes a step-start part, `reset-step` removes every part after the last
one, a text or reasoning delta needs its part started and not ended, tool chunks update the
call's one part. It raises where the SDK throws; tests/frontends runs the SDK itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from terminus.service.frontends.chunks import (
    Chunk,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResetStep,
    StartStep,
    TextDelta,
    TextEnd,
    TextStart,
    ToolInputAvailable,
    ToolInputError,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputError,
)


class Rejected(AssertionError):
    """A chunk the SDK's reader would throw on."""


@dataclass
class UiMessage:
    parts: list[dict[str, Any]] = field(default_factory=list)
    active: dict[str, dict[str, Any]] = field(default_factory=dict)

    def text(self, kind: str = "text") -> str:
        return "".join(p["text"] for p in self.parts if p["type"] == kind)

    def tools(self) -> dict[str, dict[str, Any]]:
        return {p["toolCallId"]: p for p in self.parts if p["type"] == "tool"}


def read(chunks: list[Chunk]) -> UiMessage:
    """The message a client holds after `chunks`."""
    message = UiMessage()
    for chunk in chunks:
        apply(message, chunk)
    return message


def apply(message: UiMessage, chunk: Chunk) -> None:
    match chunk:
        case StartStep():
            message.parts.append({"type": "step-start"})
        case ResetStep():
            _reset(message)
        case TextStart() | ReasoningStart():
            kind = "text" if isinstance(chunk, TextStart) else "reasoning"
            part = {"type": kind, "text": "", "id": chunk.id}
            message.active[f"{kind}:{chunk.id}"] = part
            message.parts.append(part)
        case TextDelta() | ReasoningDelta():
            _active(message, chunk, "text" if isinstance(chunk, TextDelta) else "reasoning")[
                "text"
            ] += chunk.delta
        case TextEnd() | ReasoningEnd():
            kind = "text" if isinstance(chunk, TextEnd) else "reasoning"
            _active(message, chunk, kind)
            del message.active[f"{kind}:{chunk.id}"]
        case ToolInputStart() | ToolInputAvailable() | ToolInputError():
            _tool(message, chunk.tool_call_id, create=True)["state"] = type(chunk).__name__
        case ToolOutputAvailable() | ToolOutputError():
            _tool(message, chunk.tool_call_id, create=False)["state"] = type(chunk).__name__


def _reset(message: UiMessage) -> None:
    starts = [n for n, p in enumerate(message.parts) if p["type"] == "step-start"]
    del message.parts[starts[-1] + 1 if starts else 0 :]
    message.active.clear()


def _active(
    message: UiMessage, chunk: TextDelta | ReasoningDelta | TextEnd | ReasoningEnd, kind: str
) -> dict[str, Any]:
    part = message.active.get(f"{kind}:{chunk.id}")
    if part is None:
        raise Rejected(f"{type(chunk).__name__} for a {kind} part not started: {chunk.id}")
    return part


def _tool(message: UiMessage, call_id: str, create: bool) -> dict[str, Any]:
    found = message.tools().get(call_id)
    if found is None:
        if not create:
            raise Rejected(f"tool output for a call not shown: {call_id}")
        found = {"type": "tool", "toolCallId": call_id}
        message.parts.append(found)
    return found
