"""Amazon Bedrock ConverseStream events: one JSON object per event, keyed by the event name.

Usage arrives in `metadata` after `messageStop`, so the `FinishStep` waits for both and is
followed by `ProviderTerminal(kind="messageStop")`. At EOF after a `messageStop` without
`metadata`, the `FinishStep` goes out with zero usage and without a terminal.
"""

from __future__ import annotations

from typing import Any

from terminus.events.adapters.base import AttemptContext, Seqs
from terminus.events.adapters.reasons import BEDROCK_STOP, reason_of
from terminus.events.adapters.stream import PendingTool, StreamAdapter
from terminus.events.adapters.values import count, obj, string
from terminus.events.inbound import Usage


class ConverseAdapter(StreamAdapter):
    """ConverseStream events -> inbound events."""

    def __init__(self, ctx: AttemptContext, first_seq: int | Seqs = 2) -> None:
        super().__init__(ctx, first_seq)
        self._tools: dict[int, PendingTool] = {}
        self._signatures: dict[int, str] = {}
        self._stop: str | None = None
        self._usage: dict[str, Any] | None = None
        self._finished = False

    def on_payload(self, payload: Any) -> None:
        for name, body in obj(payload).items():
            if not self.failed:
                self._event(name, obj(body))

    def on_close(self) -> None:
        if self._stop is not None and not self._finished:
            self._finished = True
            self.finish(reason_of(BEDROCK_STOP, self._stop), self._stop or None, Usage())

    def _event(self, name: str, body: dict[str, Any]) -> None:
        index = count(body.get("contentBlockIndex"))
        match name:
            case "contentBlockStart":
                self._block_start(index, obj(obj(body.get("start")).get("toolUse")))
            case "contentBlockDelta":
                self._block_delta(index, obj(body.get("delta")))
            case "contentBlockStop":
                self._block_stop(index)
            case "messageStop":
                self._stop = string(body.get("stopReason"))
                self._finish_when_complete()
            case "metadata":
                self._usage = obj(body.get("usage"))
                self._finish_when_complete()
            case exception if exception.endswith("Exception"):
                # The shape an event-stream exception frame decodes to, so both classify alike.
                message = string(body.get("message")) or exception
                self.fail(
                    {"type": "error", "error": {"type": exception, "message": message}}, message
                )
            case _:
                pass

    def _block_start(self, index: int, tool_use: dict[str, Any]) -> None:
        if tool_use:
            tool = PendingTool(string(tool_use.get("toolUseId")), string(tool_use.get("name")))
            self._tools[index] = tool
            self.tool_start(tool.call_id, tool.name)

    def _block_delta(self, index: int, delta: dict[str, Any]) -> None:
        self.part_delta("text", index, string(delta.get("text")))
        reasoning = obj(delta.get("reasoningContent"))
        self.part_delta("reasoning", index, string(reasoning.get("text")))
        if string(reasoning.get("signature")):
            self._signatures[index] = string(reasoning.get("signature"))
        tool = self._tools.get(index)
        if tool is not None:
            fragment = string(obj(delta.get("toolUse")).get("input"))
            tool.fragments.append(fragment)
            self.tool_delta(tool.call_id, tool.name, fragment)

    def _block_stop(self, index: int) -> None:
        tool = self._tools.pop(index, None)
        if tool is not None:
            self.tool_call(tool.call_id, tool.name, "".join(tool.fragments))
            return
        self.end_part("text", index)
        self.end_part("reasoning", index, self._signatures.pop(index, None))

    def _finish_when_complete(self) -> None:
        if self._stop is None or self._usage is None or self._finished:
            return
        self._finished = True
        usage = self._usage
        self.finish(
            reason_of(BEDROCK_STOP, self._stop),
            self._stop or None,
            Usage(
                input_tokens=count(usage.get("inputTokens")),
                output_tokens=count(usage.get("outputTokens")),
                cache_read_tokens=count(usage.get("cacheReadInputTokens")),
                cache_write_tokens=count(usage.get("cacheWriteInputTokens")),
            ),
        )
        self.terminal("messageStop")
