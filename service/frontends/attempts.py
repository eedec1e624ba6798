"""One attempt's content as the UI stream sees it: what its frames said, and what was sent.

The same buffer serves both modes. `hold` renders it whole once the attempt is proven
(`rendered`); `reset` sends each frame's chunks as they come (`live`) and closes what is still
open once proven (`closing`). Within a step, text and reasoning come first and tool calls last,
in arrival order, as the persisted message orders them (statemachines/projection.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from terminus.events.outbound import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ToolCallFrame,
    ToolCallUpdate,
)
from terminus.service.frontends.chunks import (
    Chunk,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolInputAvailable,
    ToolInputError,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputError,
)

TextKind = Literal["text", "reasoning"]
ContentFrame = AgentMessageChunk | AgentThoughtChunk | ToolCallFrame | ToolCallUpdate
INCOMPLETE: Final = "the tool call's input never completed"


@dataclass
class Text:
    kind: TextKind
    chunks: list[str] = field(default_factory=list)
    open: bool = False  # reset: started and not yet ended


@dataclass
class Tool:
    name: str
    input: dict[str, object] | None = None
    output: str | None = None
    error: str | None = None
    started: bool = False  # reset: `tool-input-start` sent
    available: bool = False  # reset: `tool-input-available` sent
    settled: bool = False  # reset: its outcome sent


@dataclass
class AttemptContent:
    """The parts one attempt streamed, keyed by part id in arrival order."""

    step: int
    attempt: int
    texts: dict[str, Text] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    carried: dict[str, ToolCallUpdate] = field(default_factory=dict)  # earlier steps' calls
    sent: bool = False  # reset: a chunk of it reached the client

    def take(self, frame: ContentFrame) -> None:
        """Record what the frame says."""
        if isinstance(frame, AgentMessageChunk | AgentThoughtChunk):
            kind: TextKind = "text" if isinstance(frame, AgentMessageChunk) else "reasoning"
            self.texts.setdefault(frame.part_id, Text(kind)).chunks.append(frame.delta)
            return
        tool = self.tools.setdefault(frame.tool_call_id, Tool(frame.tool_name))
        tool.name = tool.name or frame.tool_name
        if frame.input is not None:
            tool.input = frame.input
        if isinstance(frame, ToolCallUpdate):
            tool.output, tool.error = frame.output, frame.error

    def live(self, frame: ContentFrame) -> list[Chunk]:
        """Reset mode: the chunks this frame adds, sent at once."""
        if isinstance(frame, AgentMessageChunk | AgentThoughtChunk):
            return _text_live(frame.part_id, self.texts[frame.part_id], frame.delta)
        return _tool_live(frame.tool_call_id, self.tools[frame.tool_call_id])

    def closing(self) -> list[Chunk]:
        """Reset mode, once proven: end the open texts, settle the tools, apply carried outcomes."""
        out: list[Chunk] = []
        for part_id, text in self.texts.items():
            if text.open:
                out.append(_end(part_id, text.kind))
        for call_id, tool in self.tools.items():
            out += _tool_final(call_id, tool)
        return out + _carried(self.carried)

    def rendered(self) -> list[Chunk]:
        """Hold mode, once proven: every part whole, then the carried outcomes."""
        out: list[Chunk] = []
        for part_id, text in self.texts.items():
            out += _text_whole(part_id, text)
        for call_id, tool in self.tools.items():
            out += _tool_live(call_id, tool) + _tool_final(call_id, tool)
        return out + _carried(self.carried)


def _text_live(part_id: str, text: Text, delta: str) -> list[Chunk]:
    out: list[Chunk] = []
    if not text.open:
        text.open = True
        out.append(_start(part_id, text.kind))
    out.append(_delta(part_id, text.kind, delta))
    return out


def _text_whole(part_id: str, text: Text) -> list[Chunk]:
    whole = "".join(text.chunks)
    return [_start(part_id, text.kind), _delta(part_id, text.kind, whole), _end(part_id, text.kind)]


def _start(part_id: str, kind: TextKind) -> Chunk:
    return TextStart(id=part_id) if kind == "text" else ReasoningStart(id=part_id)


def _delta(part_id: str, kind: TextKind, delta: str) -> Chunk:
    if kind == "text":
        return TextDelta(id=part_id, delta=delta)
    return ReasoningDelta(id=part_id, delta=delta)


def _end(part_id: str, kind: TextKind) -> Chunk:
    return TextEnd(id=part_id) if kind == "text" else ReasoningEnd(id=part_id)


def _tool_live(call_id: str, tool: Tool) -> list[Chunk]:
    """The tool's chunks not sent yet; an outcome waits until the input is there, because the
    SDK's part would go back from its outcome to `input-available` on a later input."""
    out: list[Chunk] = []
    if not tool.started:
        tool.started = True
        out.append(ToolInputStart(tool_call_id=call_id, tool_name=tool.name))
    if tool.input is not None and not tool.available:
        tool.available = True
        out.append(ToolInputAvailable(tool_call_id=call_id, tool_name=tool.name, input=tool.input))
    if tool.available and not tool.settled:
        out += _outcome(call_id, tool)
    return out


def _outcome(call_id: str, tool: Tool) -> list[Chunk]:
    if tool.error is not None:
        tool.settled = True
        return [ToolOutputError(tool_call_id=call_id, error_text=tool.error)]
    if tool.output is not None:
        tool.settled = True
        return [ToolOutputAvailable(tool_call_id=call_id, output=tool.output)]
    return []


def _tool_final(call_id: str, tool: Tool) -> list[Chunk]:
    """A proven attempt's call that never got its input is incomplete: say so, with its error."""
    if tool.available or tool.settled:
        return []
    tool.settled = True
    error = tool.error if tool.error is not None else INCOMPLETE
    return [ToolInputError(tool_call_id=call_id, tool_name=tool.name, input=None, error_text=error)]


def _carried(carried: dict[str, ToolCallUpdate]) -> list[Chunk]:
    out: list[Chunk] = []
    for call_id, update in carried.items():
        if update.error is not None:
            out.append(ToolOutputError(tool_call_id=call_id, error_text=update.error))
        elif update.output is not None:
            out.append(ToolOutputAvailable(tool_call_id=call_id, output=update.output))
    return out
