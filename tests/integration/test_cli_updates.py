"""`terminus updates`, run in process against a real Redis: JSON is one frame per line with its
cursor, text one readable line per frame with the key fields of each kind, `--follow` prints
each frame before the next arrives and exits quietly on Ctrl-C, and colour is for terminals only."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import msgspec
import pytest
from cli_support import (
    ANSI,
    SESSION,
    add_frames,
    chunk,
    keys,
    lines,
    set_env,
    store_at,
    xadd,
)
from redis import Redis

from terminus.events.codec import encode_json
from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import Usage
from terminus.events.outbound import (
    AgentError,
    AttemptDiscarded,
    MessageCommitted,
    Retrying,
    SessionUpdate,
    ToolCallUpdate,
    TurnFinished,
)
from terminus.service.cli import render
from terminus.service.cli.main import main
from terminus.service.sdk import views


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[Redis]:
    """A sync client for setting up data; every key under `prefix` is unlinked afterwards."""
    with store_at(redis_url, prefix) as client:
        yield client


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str) -> None:
    set_env(monkeypatch, redis_url, prefix)


@pytest.mark.usefixtures("env")
def test_updates_json_is_one_frame_per_line_with_its_cursor(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = add_frames(store, prefix, 3)
    assert main(["updates", SESSION, "--json"]) == 0
    decoded = [
        msgspec.json.decode(line, type=SessionUpdate) for line in lines(capsys.readouterr().out)
    ]
    assert [f.cursor for f in decoded] == ids
    assert main(["updates", SESSION, "--json", "--from", ids[0]]) == 0
    later = [
        msgspec.json.decode(line, type=SessionUpdate) for line in lines(capsys.readouterr().out)
    ]
    assert [f.cursor for f in later] == ids[1:]


@pytest.mark.usefixtures("env")
def test_updates_text_is_one_readable_line_per_frame(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = add_frames(store, prefix, 2)
    assert main(["updates", SESSION]) == 0
    assert lines(capsys.readouterr().out) == [
        f'{ids[n]} agent_message_chunk turn=t-1 1.1 p-1 "d{n}"' for n in range(2)
    ]


@pytest.mark.usefixtures("env")
def test_follow_prints_until_ctrl_c_then_exits_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def interrupted(*args: object, **kwargs: object) -> AsyncGenerator[SessionUpdate, None]:
        yield msgspec.structs.replace(chunk(0), cursor="7-0")
        raise KeyboardInterrupt

    monkeypatch.setattr(views, "follow_updates", interrupted)
    assert main(["updates", SESSION, "--follow", "--json"]) == 0
    captured = capsys.readouterr()
    [line] = lines(captured.out)
    assert msgspec.json.decode(line, type=SessionUpdate).cursor == "7-0"
    assert captured.err == ""


def frames_of_every_kind() -> list[SessionUpdate]:
    ids: dict[str, Any] = {"session_id": SESSION, "turn_id": "t-1"}
    error = LLMErrorPayload(
        type="rate_limit", message="slow down", retryable=True, status=429, retry_after_seconds=2.0
    )
    return [
        AttemptDiscarded(**ids, step=1, attempt=1, part_ids=["p-1"], reason="missing_terminal"),
        Retrying(
            **ids, step=1, attempt=2, max_attempts=3, delay_ms=250, reason="rate_limit", error=error
        ),
        ToolCallUpdate(
            **ids,
            step=1,
            attempt=2,
            tool_call_id="c-1",
            tool_name="search",
            status="completed",
            output="found",
        ),
        MessageCommitted(**ids, message_id="m-1", step=1),
        AgentError(**ids, error=error),
        TurnFinished(**ids, stopReason="end_turn", usage=Usage(output_tokens=3)),
    ]


@pytest.mark.usefixtures("env")
def test_updates_text_gives_the_key_fields_of_each_kind_of_frame(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = keys(prefix).session(SESSION)
    ids = [xadd(store, key, {"e": encode_json(f)}) for f in frames_of_every_kind()]
    assert main(["updates", SESSION]) == 0
    out = capsys.readouterr().out
    assert not ANSI.search(out)
    error = "(rate_limit: slow down retryable status=429 retry_after=2.0s)"
    assert lines(out) == [
        f'{ids[0]} attempt_discarded   turn=t-1 1.1 part_ids=["p-1"] reason="missing_terminal"',
        f"{ids[1]} retrying            turn=t-1 1.2 max_attempts=3 delay_ms=250 "
        f'reason="rate_limit" error={error}',
        f'{ids[2]} tool_call_update    turn=t-1 1.2 tool_call_id="c-1" tool_name="search" '
        f'input=null status="completed" output="found" error=null',
        f'{ids[3]} message_committed   turn=t-1 1 message_id="m-1"',
        f'{ids[4]} agent_error         turn=t-1 error={error} stopReason="error"',
        f'{ids[5]} turn_finished       turn=t-1 stopReason="end_turn" usage=(in=0 out=3)',
    ]
    assert main(["updates", SESSION, "--json"]) == 0
    assert lines(capsys.readouterr().out) == [
        encode_json(msgspec.structs.replace(f, cursor=i)).decode()
        for f, i in zip(frames_of_every_kind(), ids, strict=True)
    ]


@pytest.mark.usefixtures("env")
def test_follow_prints_each_frame_before_the_next_arrives(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []

    async def slow(*args: object, **kwargs: object) -> AsyncGenerator[SessionUpdate, None]:
        for n in range(2):
            yield msgspec.structs.replace(chunk(n), cursor=f"{7 + n}-0")
            seen.append(capsys.readouterr().out)  # what the terminal shows before frame n+1
        raise KeyboardInterrupt

    monkeypatch.setattr(views, "follow_updates", slow)
    assert main(["updates", SESSION, "--follow"]) == 0
    assert seen == [
        '7-0 agent_message_chunk turn=t-1 1.1 p-1 "d0"\n',
        '8-0 agent_message_chunk turn=t-1 1.1 p-1 "d1"\n',
    ]
    assert capsys.readouterr() == ("", "")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_is_for_terminals_only() -> None:
    """The other tests' "no escape codes" would pass for a renderer that never colours."""
    frame = frames_of_every_kind()[4]
    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        render.console(stream).print(render.frame_line(frame), soft_wrap=True)
    assert ANSI.search(tty.getvalue())
    assert not ANSI.search(pipe.getvalue())
    assert ANSI.sub("", re.sub(r"\x1b\[[0-9;]*m", "", tty.getvalue())) == pipe.getvalue()
