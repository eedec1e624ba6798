"""`terminus messages | updates | dlq | publish`, run in process against a real Redis."""

from __future__ import annotations

import io
import re
import socket
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from redis import Redis
from redis.typing import EncodableT, FieldT

from terminus.events.codec import decode_event, encode_json
from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import AttemptStarted, InboundEvent, TurnStarted, Usage
from terminus.events.outbound import (
    AgentError,
    AgentMessageChunk,
    AttemptDiscarded,
    MessageCommitted,
    PersistedMessage,
    ReasoningPart,
    Retrying,
    SessionUpdate,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCallUpdate,
    ToolPart,
    TurnFinished,
)
from terminus.service.cli import render
from terminus.service.cli.main import main
from terminus.service.cli.publish import Published
from terminus.service.cli.simulate import simulate
from terminus.service.keys import Keys, keys_for_session, partition_of
from terminus.service.redis import embedded
from terminus.service.redis.embedded import answers_ping, ensure_redis, free_port
from terminus.service.sdk import views
from terminus.service.settings import Settings
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

P = 4
SESSION = "s-views"
DEMO = Path(__file__).parents[2] / "service" / "cli" / "demo_transcripts"
UNREACHABLE = "redis://127.0.0.1:1/0"
ANSI = re.compile(r"\x1b\[")
Entry = tuple[bytes, dict[bytes, bytes]]


def chunk(n: int) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_id=SESSION, turn_id="t-1", step=1, attempt=1, part_id="p-1", delta=f"d{n}"
    )


def message(message_id: str, text: str) -> PersistedMessage:
    return PersistedMessage(
        message_id=message_id,
        session_id=SESSION,
        turn_id="t-1",
        parts=[TextPart(part_id="p-1", text=text)],
        finish_reason="stop",
        usage=Usage(),
        provider="p",
        model="m",
    )


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[Redis]:
    """A sync client for setting up data; every key under `prefix` is unlinked afterwards."""
    with Redis.from_url(redis_url) as client:
        yield client
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.unlink(*keys)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("TERMINUS_PREFIX", prefix)
    monkeypatch.setenv("TERMINUS_PARTITIONS", str(P))


def keys(prefix: str) -> Keys:
    return keys_for_session(SESSION, P, prefix)


def xadd(store: Redis, key: str, fields: dict[FieldT, EncodableT]) -> str:
    entry_id = store.xadd(key, fields)
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def entries(store: Redis, key: str) -> list[Entry]:
    return cast("list[Entry]", store.xrange(key))


def add_frames(store: Redis, prefix: str, count: int) -> list[str]:
    key = keys(prefix).session(SESSION)
    return [xadd(store, key, {"e": encode_json(chunk(n))}) for n in range(count)]


def add_messages(store: Redis, prefix: str) -> list[PersistedMessage]:
    committed = [message("m-b", "hello"), message("m-a", "again")]
    for at_ms, msg in enumerate(committed, start=1):
        store.hset(keys(prefix).messages(SESSION), msg.message_id, encode_json(msg))
        store.zadd(keys(prefix).message_order(SESSION), {msg.message_id: at_ms})
    return committed


def add_dead(store: Redis, partition: int, prefix: str, raw: bytes) -> str:
    dead = Keys(partition, prefix)
    fields: dict[FieldT, EncodableT] = {"raw": raw, "reason": "malformed json"}
    fields.update(source_stream=dead.inbound, source_id="5-0")
    return xadd(store, dead.dead, fields)


def lines(text: str) -> list[str]:
    return text.splitlines()


def tables(text: str) -> list[str]:
    """The message tables of `messages` output, split at each table's title line."""
    return re.split(r"^(?=assistant )", text, flags=re.MULTILINE)[1:]


def assert_two_messages_in_order(out: str) -> None:
    """`add_messages`' messages, one table each in commit order: id, finish reason and text."""
    first, second = tables(out)
    assert first.startswith("assistant m-b  turn t-1  p/m")
    assert second.startswith("assistant m-a  turn t-1  p/m")
    for table, text in ((first, "hello"), (second, "again")):
        assert re.search(rf"^ +text +p-1 +{text} *$", table, re.MULTILINE)
        assert "finish_reason=stop  usage in=0 out=0" in table
    assert not ANSI.search(out)


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
            ToolPart(tool_call_id="c-1", name="search", input={"q": "x"}, state="completed",
                     output="found"),
            ToolPart(tool_call_id="c-2", name="fetch", input=None, state="error",
                     error="tool result missing"),
            StepFinishPart(step=1, finish_reason="tool-calls", usage=Usage(input_tokens=5)),
            StepStartPart(step=2),
            TextPart(part_id="p-2", text="x" * 200),
            StepFinishPart(step=2, finish_reason="stop", usage=Usage(output_tokens=4)),
        ],
        finish_reason="stop",
        usage=Usage(input_tokens=5, output_tokens=4, reasoning_tokens=2),
        provider="anthropic",
        model="claude-x",
    )  # fmt: skip


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


def frames_of_every_kind() -> list[SessionUpdate]:
    ids: dict[str, Any] = {"session_id": SESSION, "turn_id": "t-1"}
    error = LLMErrorPayload(
        type="rate_limit", message="slow down", retryable=True, status=429, retry_after_seconds=2.0
    )
    return [
        AttemptDiscarded(**ids, step=1, attempt=1, part_ids=["p-1"], reason="missing_terminal"),
        Retrying(**ids, step=1, attempt=2, max_attempts=3, delay_ms=250, reason="rate_limit",
                 error=error),
        ToolCallUpdate(**ids, step=1, attempt=2, tool_call_id="c-1", tool_name="search",
                       status="completed", output="found"),
        MessageCommitted(**ids, message_id="m-1", step=1),
        AgentError(**ids, error=error),
        TurnFinished(**ids, stopReason="end_turn", usage=Usage(output_tokens=3)),
    ]  # fmt: skip


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
        f'{ids[1]} retrying            turn=t-1 1.2 max_attempts=3 delay_ms=250 '
        f'reason="rate_limit" error={error}',
        f'{ids[2]} tool_call_update    turn=t-1 1.2 tool_call_id="c-1" tool_name="search" '
        f'input=null status="completed" output="found" error=null',
        f'{ids[3]} message_committed   turn=t-1 1 message_id="m-1"',
        f'{ids[4]} agent_error         turn=t-1 error={error} stopReason="error"',
        f'{ids[5]} turn_finished       turn=t-1 stopReason="end_turn" usage=(in=0 out=3)',
    ]  # fmt: skip
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


@pytest.mark.usefixtures("env")
def test_dlq_list_json_keeps_raw_bytes_across_partitions(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = add_dead(store, 3, prefix, b"\xff\x00 not json")
    second = add_dead(store, 1, prefix, b"{}")
    assert main(["dlq", "list", "--json"]) == 0
    letters = [
        msgspec.json.decode(x, type=views.DeadLetter) for x in lines(capsys.readouterr().out)
    ]
    assert [(d.partition, d.id, d.raw) for d in letters] == [
        (1, second, b"{}"),
        (3, first, b"\xff\x00 not json"),
    ]
    assert main(["dlq", "list", "--partition", "3"]) == 0
    [line] = lines(capsys.readouterr().out)
    assert line.startswith(f"partition 3 {first} <- ")


@pytest.mark.usefixtures("env")
def test_dlq_requeue_by_id_or_all(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    wanted = add_dead(store, 3, prefix, b"\xff raw")
    add_dead(store, 1, prefix, b"{}")
    assert main(["dlq", "requeue", wanted, "--partition", "3"]) == 0
    assert capsys.readouterr().out == "requeued 1 dead letter\n"
    [(_, fields)] = entries(store, Keys(3, prefix).inbound)
    assert fields == {b"e": b"\xff raw", b"requeued_from": wanted.encode()}
    assert main(["dlq", "requeue", "--all"]) == 0
    assert capsys.readouterr().out == "requeued 2 dead letters\n"
    assert store.xlen(Keys(3, prefix).dead) == 1, "requeue keeps the dead letter"


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize("argv", [["9-9"], [], ["--all", "9-9"], ["--all", "--partition", "4"]])
def test_dlq_requeue_of_nothing_known_is_an_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dlq", "requeue", *argv]) == 1
    captured = capsys.readouterr()
    assert len(lines(captured.err)) == 1
    assert captured.err.startswith("terminus dlq: ")


def fold(events: list[InboundEvent]) -> tuple[Turn, Outputs]:
    turn: Turn | None = None
    out = Outputs()
    for event in events:
        turn, _ = evolve(turn, event, out=out)
    assert turn is not None
    return turn, out


SCENARIOS = [
    ("anthropic", ["http-429-rate-limit-error-recorded-sdk-python.json",
                   "text-after-429-retries-recorded-sdk-python.sse"]),
    ("openai-chat", ["synthesized-empty-finish.jsonl",
                     "text-stop-usage-done-recorded-fantasy.sse"]),
]  # fmt: skip


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize(("provider", "names"), SCENARIOS)
def test_publish_writes_the_turn_to_its_partition(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str], provider: str, names: list[str]
) -> None:
    files = [DEMO / name for name in names]
    argv = ["publish", "--provider", provider, "--session", SESSION, "--turn", "t-pub", "--json"]
    assert main([*argv, *map(str, files)]) == 0
    done = msgspec.json.decode(capsys.readouterr().out, type=Published)
    partition = partition_of(SESSION, P)
    assert (done.session_id, done.turn_id, done.partition) == (SESSION, "t-pub", partition)
    log = entries(store, Keys(partition, prefix).inbound)
    assert len(log) == done.entries
    assert sum(store.xlen(Keys(p, prefix).inbound) > 0 for p in range(P)) == 1
    events = [decode_event(fields[b"e"]) for _, fields in log]
    assert isinstance(events[0], TurnStarted)
    assert [e.attempt for e in events if isinstance(e, AttemptStarted)] == [1, 2]
    turn, out = fold(events)
    expected = simulate(files, provider=provider, session_id=SESSION, turn_id="t-pub")
    assert turn.state.value == expected.state == "finished"
    assert out.frames == expected.updates


@pytest.mark.usefixtures("env")
def test_publish_text_names_a_fresh_turn(store: Redis, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["publish", "--provider", "anthropic", "--session", SESSION]
    assert main([*argv, str(DEMO / "text-recorded-fantasy.sse")]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(
        r"published \d+ entries of turn [0-9a-f]{32} \(session s-views\) to partition \d\n", out
    )


@pytest.mark.usefixtures("env")
def test_publish_of_a_bad_file_publishes_nothing(
    store: Redis, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.sse"
    argv = ["publish", "--provider", "anthropic", "--session", SESSION]
    assert main([*argv, str(DEMO / "text-recorded-fantasy.sse"), str(missing)]) == 1
    [line] = lines(capsys.readouterr().err)
    assert line.startswith(f"terminus publish: {missing}: cannot read")
    assert store.xlen(Keys(partition_of(SESSION, P), prefix).inbound) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["messages", SESSION],
        ["updates", SESSION, "--follow"],
        ["dlq", "list"],
        ["dlq", "requeue", "--all"],
        ["publish", "--provider", "anthropic", "--session", SESSION,
         str(DEMO / "text-recorded-fantasy.sse")],
    ],
)  # fmt: skip
def test_an_unreachable_redis_is_one_line_and_status_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", UNREACHABLE)
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = lines(captured.err)
    assert line.startswith(f"terminus {argv[0]}: cannot reach Redis: ")


def test_commands_find_the_run_server_at_the_default_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setattr(embedded, "LOCAL_URL", local)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("TERMINUS_PARTITIONS", str(P))
    monkeypatch.setenv("TERMINUS_PREFIX", "default-url")
    url, server = ensure_redis(Settings(), tmp_path)
    assert server is not None
    try:
        assert url == local
        with Redis.from_url(url) as client:
            add_messages(client, "default-url")
        assert main(["messages", SESSION]) == 0
        assert_two_messages_in_order(capsys.readouterr().out)
    finally:
        server.stop()


def test_a_taken_default_port_falls_back_to_a_free_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        monkeypatch.setattr(embedded, "LOCAL_URL", f"redis://127.0.0.1:{port}/0")
        url, server = ensure_redis(Settings(), tmp_path)
    assert server is not None
    try:
        assert server.port != port
        assert answers_ping(url)
    finally:
        server.stop()
