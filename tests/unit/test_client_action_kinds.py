"""Every output item kind the OpenAI SDK defines as a request for the client to act makes its step
a tool step: the turn waits in `awaiting_step` for the tools' results (events/adapters/
event_kinds.py RESPONSES_OUTPUT_ITEMS and CHAT_TOOL_CALLS). Marking any of them `server` (or
`content`) would persist the step as the turn's answer; each kind below fails then.

One item per kind, each validated against the SDK's own pydantic model so that it is an item the
API can send: openai-python `openai.types.responses.ResponseOutputItem` (function_call:
ResponseFunctionToolCall, custom_tool_call: ResponseCustomToolCall, computer_call:
ResponseComputerToolCall, local_shell_call: LocalShellCall, shell_call:
ResponseFunctionShellToolCall with a `local` environment, apply_patch_call:
ResponseApplyPatchToolCall, mcp_approval_request: McpApprovalRequest, tool_search_call:
ResponseToolSearchCall with `execution: client`), and `ChatCompletionMessageToolCallUnion` for the
Chat Completions `function` and `custom` tool calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pydantic
import pytest
from openai.types.chat import ChatCompletionMessageToolCallUnion
from openai.types.responses import ResponseOutputItem
from test_adapters_support import run_payloads

from terminus.events.adapters.event_kinds import CHAT_TOOL_CALLS, RESPONSES_OUTPUT_ITEMS
from terminus.events.inbound import FinishStep, ToolCall
from terminus.service.cli.simulate import simulate

CALL: Final = "call_7Qx"
RESPONSES_CLIENT_ITEMS: Final[dict[str, dict[str, Any]]] = {
    "function_call": {
        "type": "function_call",
        "id": "fc_1",
        "call_id": CALL,
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
        "status": "completed",
    },
    "custom_tool_call": {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": CALL,
        "name": "write_sql",
        "input": "SELECT 1",
    },
    "computer_call": {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": CALL,
        "action": {"type": "click", "button": "left", "x": 120, "y": 48},
        "pending_safety_checks": [],
        "status": "completed",
    },
    "local_shell_call": {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": CALL,
        "action": {"type": "exec", "command": ["ls", "-a"], "env": {}},
        "status": "completed",
    },
    "shell_call": {
        "type": "shell_call",
        "id": "sh_1",
        "call_id": CALL,
        "action": {"commands": ["ls -a"], "timeout_ms": 10000, "max_output_length": 4096},
        "environment": {"type": "local"},
        "status": "completed",
    },
    "apply_patch_call": {
        "type": "apply_patch_call",
        "id": "apc_1",
        "call_id": CALL,
        "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-x\n+y\n"},
        "status": "completed",
    },
    "mcp_approval_request": {
        "type": "mcp_approval_request",
        "id": CALL,
        "name": "deploy",
        "server_label": "ops",
        "arguments": '{"env":"prod"}',
    },
    "tool_search_call": {
        "type": "tool_search_call",
        "id": "ts_1",
        "call_id": CALL,
        "arguments": {"query": "weather"},
        "execution": "client",
        "status": "completed",
    },
}
CHAT_CLIENT_CALLS: Final[dict[str, dict[str, Any]]] = {
    "function": {
        "id": CALL,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    },
    "custom": {"id": CALL, "type": "custom", "custom": {"name": "write_sql", "input": "SELECT 1"}},
}


def responses_stream(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a Responses stream carries for one output item, then its completion."""
    started = {**item, "status": "in_progress"} if "status" in item else item
    if item["type"] == "function_call":
        started = {**started, "arguments": ""}
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": started},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"status": "completed", "output": [item]}},
    ]


def chat_stream(call: dict[str, Any]) -> list[Any]:
    delta = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
    return [
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ]


def settled(provider: str, payloads: list[Any], tmp_path: Path) -> str:
    """The state a turn reaches when its one step is the given stream."""
    capture = tmp_path / "step.jsonl"
    capture.write_text("".join(json.dumps(p) + "\n" for p in payloads))
    return simulate([capture], provider=provider).state


def test_the_lists_name_every_kind_the_tables_give_the_client() -> None:
    client = {kind for kind, actor in RESPONSES_OUTPUT_ITEMS.items() if actor == "client"}
    assert client == set(RESPONSES_CLIENT_ITEMS)
    assert {kind for kind, actor in CHAT_TOOL_CALLS.items() if actor == "client"} == set(
        CHAT_CLIENT_CALLS
    )


@pytest.mark.parametrize("kind", sorted(RESPONSES_CLIENT_ITEMS))
def test_each_responses_item_is_one_the_sdk_defines(kind: str) -> None:
    item = pydantic.TypeAdapter(ResponseOutputItem).validate_python(RESPONSES_CLIENT_ITEMS[kind])
    assert item.type == kind


@pytest.mark.parametrize("kind", sorted(CHAT_CLIENT_CALLS))
def test_each_chat_tool_call_is_one_the_sdk_defines(kind: str) -> None:
    call = CHAT_CLIENT_CALLS[kind]
    assert pydantic.TypeAdapter(ChatCompletionMessageToolCallUnion).validate_python(call).type == (
        kind
    )


@pytest.mark.parametrize("kind", sorted(RESPONSES_CLIENT_ITEMS))
def test_a_responses_item_that_asks_the_client_to_act_makes_a_tool_step(
    kind: str, tmp_path: Path
) -> None:
    payloads = responses_stream(RESPONSES_CLIENT_ITEMS[kind])
    events = run_payloads("openai-responses", payloads)
    assert [e.tool_call_id for e in events if isinstance(e, ToolCall)] == [CALL]
    assert [e.finish_reason for e in events if isinstance(e, FinishStep)] == ["tool-calls"]
    assert settled("openai-responses", payloads, tmp_path) == "awaiting_step"


@pytest.mark.parametrize("kind", sorted(CHAT_CLIENT_CALLS))
def test_a_chat_tool_call_of_each_kind_makes_a_tool_step(kind: str, tmp_path: Path) -> None:
    payloads = chat_stream(CHAT_CLIENT_CALLS[kind])
    events = run_payloads("openai-chat", payloads)
    assert [e.tool_call_id for e in events if isinstance(e, ToolCall)] == [CALL]
    assert settled("openai-chat", payloads, tmp_path) == "awaiting_step"
