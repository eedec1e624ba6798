"""Anthropic Messages streams, and the Anthropic payloads inside Bedrock InvokeModel streams.

A block left open (no `content_block_stop`) stays open: the core marks such a tool call
incomplete. A second `message_start` before `message_stop` means a gateway spliced two
generations together; that attempt is reported as an error and the rest of it is ignored.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from terminus.events.adapters.base import AttemptContext, Seqs
from terminus.events.adapters.eventstream import unwrap_decoded_frame
from terminus.events.adapters.reasons import ANTHROPIC_STOP, reason_of
from terminus.events.adapters.stream import StreamAdapter
from terminus.events.adapters.values import compact, count, error_message, obj, string
from terminus.events.inbound import ToolResult, Usage

SPLICED_MESSAGE: Final = "message_start before message_stop: overlapping generations"


class _Block(msgspec.Struct):
    kind: Literal["text", "reasoning", "tool"]
    call_id: str = ""
    name: str = ""
    initial: dict[str, Any] = msgspec.field(default_factory=dict)
    fragments: list[str] = msgspec.field(default_factory=list)
    signature: str = ""


class AnthropicAdapter(StreamAdapter):
    """Anthropic Messages SSE events -> inbound events."""

    def __init__(self, ctx: AttemptContext, first_seq: int | Seqs = 2) -> None:
        super().__init__(ctx, first_seq)
        self._blocks: dict[int, _Block] = {}
        self._in_message = False
        self._usage: dict[str, Any] = {}

    def on_payload(self, payload: Any) -> None:
        data = obj(payload)
        index = count(data.get("index"))
        match string(data.get("type")):
            case "message_start":
                self._message_start(obj(data.get("message")))
            case "content_block_start":
                self._block_start(index, obj(data.get("content_block")))
            case "content_block_delta":
                self._block_delta(index, obj(data.get("delta")))
            case "content_block_stop":
                self._block_stop(index)
            case "message_delta":
                self._message_delta(data)
            case "message_stop":
                self._in_message = False
                self.terminal("message_stop")
            case "error":
                self.fail(data, error_message(data) or "error event")
            case _:
                pass

    def _message_start(self, message: dict[str, Any]) -> None:
        if self._in_message:
            self.fail(None, SPLICED_MESSAGE)
            return
        self._in_message = True
        self._usage = dict(obj(message.get("usage")))

    def _block_start(self, index: int, block: dict[str, Any]) -> None:
        match string(block.get("type")):
            case "text":
                self._blocks[index] = _Block("text")
                self.start_part("text", index)
            case "thinking":
                self._blocks[index] = _Block("reasoning")
                self.start_part("reasoning", index)
            case kind if kind == "tool_use" or kind.endswith("_tool_use"):
                call_id, name = string(block.get("id")), string(block.get("name"))
                self._blocks[index] = _Block("tool", call_id, name, obj(block.get("input")))
                self.tool_start(call_id, name)
            case kind if kind.endswith("_tool_result"):
                call_id = string(block.get("tool_use_id"))
                self.emit(ToolResult, tool_call_id=call_id, output=compact(block.get("content")))
            case _:
                pass

    def _block_delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.get(index)
        if block is None:
            return
        match string(delta.get("type")):
            case "text_delta" if block.kind == "text":
                self.part_delta("text", index, string(delta.get("text")))
            case "thinking_delta" if block.kind == "reasoning":
                self.part_delta("reasoning", index, string(delta.get("thinking")))
            case "signature_delta":
                block.signature = string(delta.get("signature"))
            case "input_json_delta" if block.kind == "tool":
                fragment = string(delta.get("partial_json"))
                block.fragments.append(fragment)
                self.tool_delta(block.call_id, block.name, fragment)
            case _:
                pass

    def _block_stop(self, index: int) -> None:
        block = self._blocks.pop(index, None)
        if block is None:
            return
        match block.kind:
            case "text":
                self.end_part("text", index)
            case "reasoning":
                self.end_part("reasoning", index, block.signature)
            case "tool":
                raw = "".join(block.fragments)
                self.tool_call(block.call_id, block.name, raw if raw.strip() else block.initial)

    def _message_delta(self, data: dict[str, Any]) -> None:
        self._usage.update(obj(data.get("usage")))
        reason = string(obj(data.get("delta")).get("stop_reason"))
        if reason:
            self.finish(reason_of(ANTHROPIC_STOP, reason), reason, self._usage_now())

    def _usage_now(self) -> Usage:
        usage = self._usage
        return Usage(
            input_tokens=count(usage.get("input_tokens")),
            output_tokens=count(usage.get("output_tokens")),
            cache_read_tokens=count(usage.get("cache_read_input_tokens")),
            cache_write_tokens=count(usage.get("cache_creation_input_tokens")),
        )


class BedrockAdapter(AnthropicAdapter):
    """Anthropic events carried by Bedrock; also reads frames already decoded to JSON."""

    def normalize(self, payload: Any) -> Any:
        return unwrap_decoded_frame(payload)
