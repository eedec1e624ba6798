"""`terminus messages`, run in process against a real Redis: JSON is one array in commit order,
text is one table per message with its id, finish reason and a summary of every kind of part."""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec
import pytest
from cli_support import (
    ANSI,
    SESSION,
    add_messages,
    assert_two_messages_in_order,
    keys,
    lines,
    set_env,
    store_at,
)
from redis import Redis

from terminus.events.codec import encode_json
from terminus.events.inbound import Usage
from terminus.events.outbound import (
    PersistedMessage,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolPart,
)
from terminus.service.cli.main import main


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[Redis]:
    """A sync client for setting up data; every key under `prefix` is unlinked afterwards."""
    with store_at(redis_url, prefix) as client:
        yield client


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str) -> None:
    set_env(monkeypatch, redis_url, prefix)


@pytest.mark.usefixtures("env")
def test_messages_json_is_one_array_in_commit_order(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = add_messages(store, prefix)
    assert main(["messages", SESSION, "--json"]) == 0
    out = capsys.readouterr().out
    assert msgspec.json.decode(out, type=list[PersistedMessage]) == committed


@pytest.mark.usefixtures("env")
def test_messages_text_shows_id_finish_reason_and_text(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    add_messages(store, prefix)
    assert main(["messages", SESSION]) == 0
    assert_two_messages_in_order(capsys.readouterr().out)


def rich_message() -> PersistedMessage:
    """Two steps: reasoning, text that looks like markup, two tool calls, then an answer."""
    return PersistedMessage(
        message_id="m-rich",
        session_id=SESSION,
        turn_id="t-2",
        parts=[
            StepStartPart(step=1),
            ReasoningPart(part_id="r-1", text="think\nfirst"),
            TextPart(part_id="p-1", text="see [bold]this[/bold] :smile:"),
            ToolPart(
                tool_call_id="c-1",
                name="search",
                input={"q": "x"},
                state="completed",
                output="found",
            ),
            ToolPart(
                tool_call_id="c-2",
                name="fetch",
                input=None,
                state="error",
                error="tool result missing",
            ),
            StepFinishPart(step=1, finish_reason="tool-calls", usage=Usage(input_tokens=5)),
            StepStartPart(step=2),
            TextPart(part_id="p-2", text="x" * 200),
            StepFinishPart(step=2, finish_reason="stop", usage=Usage(output_tokens=4)),
        ],
        finish_reason="stop",
        usage=Usage(input_tokens=5, output_tokens=4, reasoning_tokens=2),
        provider="anthropic",
        model="claude-x",
    )


@pytest.mark.usefixtures("env")
def test_messages_text_summarises_every_kind_of_part(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    msg = rich_message()
    store.hset(keys(prefix).messages(SESSION), msg.message_id, encode_json(msg))
    store.zadd(keys(prefix).message_order(SESSION), {msg.message_id: 1})
    assert main(["messages", SESSION]) == 0
    out = capsys.readouterr().out
    assert not ANSI.search(out)
    rows = [line.strip() for line in lines(out)]
    assert rows[0] == "assistant m-rich  turn t-2  anthropic/claude-x"
    assert "finish_reason=stop  usage in=5 out=4 reasoning=2" in rows
    for row in [
        r"1 +step-start",
        r"1 +reasoning +r-1 +think⏎first",
        r"1 +text +p-1 +see \[bold\]this\[/bold\] :smile:",  # user text, not markup
        r'1 +tool +c-1 +search \[completed\] input=\{"q":"x"\} -> found',
        r"1 +tool +c-2 +fetch \[error\] input=null -> tool result missing",
        r"1 +step-finish +finish_reason=tool-calls in=5 out=0",
        r"2 +text +p-2 +x{79}…",  # a preview, not the whole text
        r"2 +step-finish +finish_reason=stop in=0 out=4",
    ]:
        assert any(re.fullmatch(row, r) for r in rows), (row, rows)
